// What an unlimited volume pays for the limits feature, per request, measured on the host where
// nanoseconds are resolvable (in the TCG VM, rounds spread far more than 1%): a queue's null
// backend alone and inside the throttling layer with no limit set, and for scale what the
// simplest real read costs: a 4 KiB read of a cached file through an io_uring, submitted and
// reaped 32 at a time (a read from a ublk volume costs more: the application's read through the
// block layer, and the server's command round trip and backend on top), and a NOP the same way.
// tests/bench/throttling-cost.sh turns them into the layer's share of that read.
#include <benchmark/benchmark.h>
#include <fcntl.h>
#include <liburing.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <vector>

#include "server/local/null_backend.h"
#include "server/qos/limiter.h"
#include "server/qos/throttling_backend.h"
#include "server/ublk/abi.h"

namespace blk::server {
namespace {

constexpr uint16_t kDepth = 32;

void CountCompletion(void* completed, uint16_t, int32_t) { ++*static_cast<uint64_t*>(completed); }

// Submits a 4 KiB read per iteration, on tags 0..kDepth-1 in turn, as a queue at depth 32 would.
void SubmitReads(benchmark::State& state, Backend& backend) {
  uint64_t completed = 0;
  absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Create(kDepth);
  if (!ring.ok()) return state.SkipWithError(std::string(ring.status().message()).c_str());
  if (absl::Status attached = backend.Attach(**ring, 0, Completer(CountCompletion, &completed));
      !attached.ok()) {
    return state.SkipWithError(std::string(attached.message()).c_str());
  }
  alignas(4096) static char buffer[4096];
  BlockIo io{.op = abi::kIoOpRead, .offset = 0, .length = 4096, .buffer = buffer};
  uint16_t tag = 0;
  for (auto _ : state) {
    backend.Submit(tag, io);
    tag = static_cast<uint16_t>((tag + 1) % kDepth);
    io.offset = (io.offset + 4096) & ((1 << 30) - 1);
  }
  if (completed != static_cast<uint64_t>(state.iterations()))
    state.SkipWithError("a read did not complete at once");
}

void BM_NullBackend(benchmark::State& state) {
  NullBackend backend(kDepth);
  SubmitReads(state, backend);
}
BENCHMARK(BM_NullBackend);

void BM_NullBackendThrottlingLayerNoLimits(benchmark::State& state) {
  ThrottlingBackend backend(std::make_unique<NullBackend>(kDepth),
                            std::make_shared<Limiter>(IoLimits{}, 512 * 1024), kDepth);
  SubmitReads(state, backend);
}
BENCHMARK(BM_NullBackendThrottlingLayerNoLimits);

// Per iteration: one request's share of a batch of kDepth prepared by `prep` (given the SQE and
// the request's index), submitted and reaped together.
template <typename Prep>
void UringBatches(benchmark::State& state, Prep prep) {
  absl::StatusOr<std::unique_ptr<Ring>> ring = Ring::Create(kDepth);
  if (!ring.ok()) return state.SkipWithError(std::string(ring.status().message()).c_str());
  io_uring* uring = (*ring)->get();
  int queued = 0;
  uint64_t index = 0;
  for (auto _ : state) {
    prep(io_uring_get_sqe(uring), index++);
    if (++queued < kDepth) continue;
    if (io_uring_submit_and_wait(uring, kDepth) != kDepth) {
      return state.SkipWithError("io_uring_submit_and_wait");
    }
    io_uring_cqe* cqe = nullptr;
    unsigned head = 0;
    io_uring_for_each_cqe(uring, head, cqe) {
      if (cqe->res < 0) return state.SkipWithError("a request failed");
    }
    io_uring_cq_advance(uring, kDepth);
    queued = 0;
  }
}

void BM_UringNopPerRequest(benchmark::State& state) {
  UringBatches(state, [](io_uring_sqe* sqe, uint64_t) { io_uring_prep_nop(sqe); });
}
BENCHMARK(BM_UringNopPerRequest);

void BM_UringCachedRead4kPerRequest(benchmark::State& state) {
  constexpr size_t kFileBytes = 1 << 20;
  const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("blk-bench-" + std::to_string(::getpid()));
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return state.SkipWithError("cannot create a file in the temporary directory");
  ::unlink(path.c_str());
  std::vector<char> data(kFileBytes, 'x');
  if (::pwrite(fd, data.data(), data.size(), 0) != static_cast<ssize_t>(data.size())) {
    ::close(fd);
    return state.SkipWithError("cannot write the file");
  }
  std::vector<char> buffers(kDepth * 4096);
  UringBatches(state, [&](io_uring_sqe* sqe, uint64_t index) {
    io_uring_prep_read(sqe, fd, &buffers[(index % kDepth) * 4096], 4096,
                       (index * 4096) % kFileBytes);
  });
  ::close(fd);
}
BENCHMARK(BM_UringCachedRead4kPerRequest);

}  // namespace
}  // namespace blk::server

BENCHMARK_MAIN();
