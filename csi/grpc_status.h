#pragma once

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace blk::csi {

// The same code and message as a gRPC status (absl and gRPC share the
// canonical code numbering).
inline grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

}  // namespace blk::csi
