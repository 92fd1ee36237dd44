#pragma once

#include <string>

#include "absl/status/status.h"
#include "grpcpp/support/status.h"

namespace blk::csi {

// The same code and message as a gRPC status (absl and gRPC share the
// canonical code numbering).
inline grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

inline grpc::Status InvalidArgument(const std::string& message) {
  return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, message);
}

}  // namespace blk::csi
