// blk_health_check SOCKET [SERVICE]: one grpc.health.v1.Health/Check over the agent's Unix
// socket. Prints the serving status (SERVING, NOT_SERVING, ...) and exits 0, or prints the gRPC
// error and exits 1.
#include <chrono>
#include <iostream>
#include <string>

#include "grpcpp/grpcpp.h"
#include "health/health.grpc.pb.h"

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: blk_health_check SOCKET [SERVICE]\n";
    return 2;
  }
  auto channel =
      grpc::CreateChannel(std::string("unix:") + argv[1], grpc::InsecureChannelCredentials());
  auto stub = grpc::health::v1::Health::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::health::v1::HealthCheckRequest request;
  if (argc == 3) request.set_service(argv[2]);
  grpc::health::v1::HealthCheckResponse response;
  const grpc::Status status = stub->Check(&context, request, &response);
  if (!status.ok()) {
    std::cerr << "health check: code " << status.error_code() << ": " << status.error_message()
              << "\n";
    return 1;
  }
  std::cout << grpc::health::v1::HealthCheckResponse::ServingStatus_Name(response.status()) << "\n";
  return 0;
}
