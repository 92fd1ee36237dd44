#include "server/ublk/queue.h"

#include <poll.h>
#include <pthread.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "common/monotonic_clock.h"
#include "server/tsan_annotations.h"
#include "server/ublk/abi.h"
#include "server/ublk/io_admission.h"
#include "server/ublk/uring_cmd.h"

namespace blk::server {
namespace {

constexpr int kCharDevFileIndex = 0;
constexpr int kFirstBackendFileIndex = 1;

IoKind KindOfOp(uint8_t op) {
  switch (op) {
    case abi::kIoOpRead:
      return IoKind::kRead;
    case abi::kIoOpWrite:
      return IoKind::kWrite;
    case abi::kIoOpFlush:
      return IoKind::kFlush;
    case abi::kIoOpDiscard:
      return IoKind::kDiscard;
    case abi::kIoOpWriteZeroes:
      return IoKind::kWriteZeroes;
    default:
      return IoKind::kOther;
  }
}

// start_ns_of_tag_ while the request is in the turn it arrived in, and once it is answered.
constexpr uint64_t kInTurn = 0;
constexpr uint64_t kAnswered = ~uint64_t{0};

uint64_t NowNs() { return static_cast<uint64_t>(blk::MonotonicNs()); }

}  // namespace

Queue::Queue(QueueSetup setup) : setup_(std::move(setup)) {}

absl::StatusOr<std::unique_ptr<Queue>> Queue::Start(QueueSetup setup) {
  if (setup.backend == nullptr || setup.depth == 0 || setup.char_fd < 0 || setup.stats == nullptr) {
    return absl::InvalidArgumentError(
        "queue setup needs a backend, a depth, /dev/ublkcN and a place for its statistics");
  }
  std::unique_ptr<Queue> queue(new Queue(std::move(setup)));
  queue->stop_fd_ = UniqueFd(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!queue->stop_fd_.valid()) return absl::ErrnoToStatus(errno, "eventfd for queue stop");
  std::promise<absl::Status> started;
  std::future<absl::Status> started_future = started.get_future();
  queue->thread_ =
      std::thread([q = queue.get(), promise = std::move(started)]() mutable { q->Run(&promise); });
  absl::Status status = started_future.get();
  if (!status.ok()) {
    queue->Join();
    return absl::Status(status.code(), absl::StrCat("queue ", queue->id(), ": ", status.message()));
  }
  return queue;
}

Queue::~Queue() {
  RequestStop();
  Join();
}

void Queue::RequestStop() {
  if (!stop_fd_.valid()) return;
  const uint64_t one = 1;
  // EAGAIN means the counter is already non-zero: the stop is signalled either way.
  [[maybe_unused]] ssize_t n = ::write(stop_fd_.get(), &one, sizeof(one));
}

void Queue::Join() {
  if (thread_.joinable()) thread_.join();
}

char* Queue::BufferOf(uint16_t tag) const {
  if (setup_.auto_buf_reg) return nullptr;
  return static_cast<char*>(buffers_.address()) + size_t{tag} * setup_.max_io_bytes;
}

void Queue::PrepFetch(io_uring_sqe* sqe, uint16_t tag, uint32_t op, int32_t result) {
  abi::IoCmd cmd{};
  cmd.q_id = setup_.queue_id;
  cmd.tag = tag;
  cmd.result = result;
  cmd.addr = reinterpret_cast<uint64_t>(BufferOf(tag));
  PrepUblkIoCmd(sqe, kCharDevFileIndex, /*fixed_file=*/true, op, cmd,
                EncodeUserData(CqeKind::kUblkCmd, tag),
                setup_.auto_buf_reg ? abi::AutoBufRegSqeAddr(tag) : 0);
}

void Queue::Run(std::promise<absl::Status>* started) {
  setup_.stats->thread_id.store(::gettid(), std::memory_order_relaxed);
  absl::Status status = Prepare();
  if (!status.ok()) {
    ring_.reset();
    setup_.stats->thread_id.store(0, std::memory_order_relaxed);
    started->set_value(status);
    return;
  }
  started->set_value(absl::OkStatus());
  Loop();
  // Results committed in the last round are still only SQEs: hand them to the kernel, so a detach
  // (agent upgrade) leaves no request the block layer must wait for or retry.
  io_uring_submit(ring_->get());
  if (commits_ != nullptr && commits_->pending() > 0) {
    // The turn's results waited for the other buffer's commit, which the kernel has now read
    // (the submit just issued it); nothing is added any more.
    if (io_uring_sqe* sqe = ring_->GetSqe(); sqe != nullptr) {
      commits_->PrepCommit(sqe, kCharDevFileIndex, EncodeUserData(CqeKind::kBatchCommit, 0),
                           /*force=*/true);
      io_uring_submit(ring_->get());
    }
  }
  if (setup_.cancel_races_dispatch) AwaitLastDispatch();
  // Releasing the ring cancels whatever fetches the kernel did not abort.
  ring_.reset();
  fetch_tags_.reset();
  commits_.reset();
  descriptors_.Reset();
  buffers_.Reset();
  setup_.stats->counters.inflight.store(0, std::memory_order_relaxed);
  setup_.stats->thread_id.store(0, std::memory_order_relaxed);
}

void Queue::AwaitLastDispatch() {
  // See QueueSetup::cancel_races_dispatch: the ring is released (and its pending fetches
  // cancelled) only once the kernel stopped handing this queue requests. Each one it hands over
  // meanwhile arrives as task work, which runs in this thread while it waits, and is held for the
  // next server. The wait ends when every fetch came back (nothing is left to cancel; the kernel
  // finds the dead server when one of those requests times out, see Device), or when none came
  // for kQuietMs: the submitters are waiting for the requests this queue holds.
  constexpr int64_t kQuietMs = 500;
  constexpr uint64_t kLongestWaitNs = 10'000'000'000;
  const uint64_t deadline_ns = NowNs() + kLongestWaitNs;
  io_uring* ring = ring_->get();
  while (setup_.depth > aborted_ + held_) {
    __kernel_timespec quiet{.tv_sec = 0, .tv_nsec = kQuietMs * 1'000'000};
    io_uring_cqe* first = nullptr;
    const int rc = io_uring_wait_cqe_timeout(ring, &first, &quiet);
    if (rc == -ETIME) return;
    if (rc < 0 && rc != -EINTR) {
      if (loop_status_.ok()) {
        loop_status_ = absl::ErrnoToStatus(
            -rc, absl::StrCat("queue ", id(), ": waiting for the last requests of the stop"));
      }
      return;
    }
    unsigned head;
    unsigned seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      if (KindOf(cqe->user_data) == CqeKind::kUblkCmd) {
        OnUblkCompletion(TagOf(cqe->user_data), cqe->res);  // held: the stop is under way
      }
    }
    io_uring_cq_advance(ring, seen);
    if (NowNs() >= deadline_ns) break;
  }
  if (setup_.depth > aborted_ + held_ && loop_status_.ok()) {
    loop_status_ = absl::DeadlineExceededError(
        absl::StrCat("queue ", id(), ": requests still arriving ", kLongestWaitNs / 1'000'000'000,
                     " s after the stop began; ", setup_.depth - aborted_ - held_,
                     " fetches cancelled while they may be handed one"));
  }
}

absl::Status Queue::Prepare() {
  NameAndPinThread();
  if (absl::Status s = MapDescriptorsAndBuffers(); !s.ok()) return s;
  if (absl::Status s = CreateRing(); !s.ok()) return s;
  if (absl::Status s = RegisterBuffers(); !s.ok()) return s;
  if (absl::Status s = RegisterFilesAndAttach(); !s.ok()) return s;
  return setup_.batch_io ? PrepareAndFetchBatch() : FetchEveryTag();
}

void Queue::NameAndPinThread() {
  // Operators and tests find the thread by this name (at most 15 characters).
  char name[16];
  std::snprintf(name, sizeof(name), "blkq%u-%u", setup_.device_id, unsigned{setup_.queue_id});
  ::pthread_setname_np(::pthread_self(), name);
  if (CPU_COUNT(&setup_.thread_cpus) > 0 &&
      ::sched_setaffinity(0, sizeof(setup_.thread_cpus), &setup_.thread_cpus) == 0) {
    pinned_.store(true, std::memory_order_relaxed);
    cpu_set_t inside;
    CPU_AND(&inside, &setup_.thread_cpus, &setup_.hctx_cpus);
    always_local_ = CPU_EQUAL(&inside, &setup_.thread_cpus);
  }
}

absl::Status Queue::MapDescriptorsAndBuffers() {
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const size_t desc_bytes = abi::DescAreaBytes(setup_.depth, page);
  void* desc = ::mmap(nullptr, desc_bytes, PROT_READ, MAP_SHARED | MAP_POPULATE, setup_.char_fd,
                      static_cast<off_t>(abi::DescAreaOffset(setup_.queue_id, page)));
  if (desc == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap of the I/O descriptors");
  descriptors_ = Mapping(desc, desc_bytes);

  // Zero copy needs no buffers of ours: the kernel lends the request's pages.
  if (!setup_.auto_buf_reg) {
    const size_t buffer_bytes = size_t{setup_.depth} * setup_.max_io_bytes;
    void* buffers =
        ::mmap(nullptr, buffer_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (buffers == MAP_FAILED) return absl::ErrnoToStatus(errno, "mmap of the I/O buffers");
    buffers_ = Mapping(buffers, buffer_bytes);
  }
  op_of_tag_.assign(setup_.depth, 0);
  start_ns_of_tag_.assign(setup_.depth, 0);
  result_of_tag_.assign(setup_.depth, 0);
  uncommitted_ = SqeWaitlist(setup_.depth);
  return absl::OkStatus();
}

absl::Status Queue::CreateRing() {
  // Each tag has at most one ublk command and its backend SQEs in flight, plus the stop poll.
  const unsigned sqes_per_io = std::max(1u, setup_.storage.max_sqes_per_io);
  const unsigned entries = std::bit_ceil((1u + sqes_per_io) * setup_.depth + 1);
  absl::StatusOr<std::unique_ptr<Ring>> ring =
      Ring::Create(entries, setup_.storage.big_ring_entries,
                   /*wake_for_task_work=*/setup_.cancel_races_dispatch);
  if (!ring.ok()) return ring.status();
  ring_ = std::move(*ring);
  ring_->RegisterFdForThisThread();
  return absl::OkStatus();
}

absl::Status Queue::RegisterBuffers() {
  if (setup_.auto_buf_reg) {
    // The table the kernel registers each tag's request pages into, at index <tag>.
    int rc = io_uring_register_buffers_sparse(ring_->get(), setup_.depth);
    if (rc < 0) return absl::ErrnoToStatus(-rc, "io_uring_register_buffers_sparse");
  } else if (setup_.storage.registered_buffers) {
    // Fixed buffers spare the backend's commands a page pinning per I/O; index = tag.
    std::vector<iovec> tag_buffers(setup_.depth);
    for (uint16_t tag = 0; tag < setup_.depth; ++tag) {
      tag_buffers[tag] = {BufferOf(tag), setup_.max_io_bytes};
    }
    int rc = io_uring_register_buffers(ring_->get(), tag_buffers.data(), setup_.depth);
    if (rc < 0) return absl::ErrnoToStatus(-rc, "io_uring_register_buffers of the I/O buffers");
  }
  return absl::OkStatus();
}

absl::Status Queue::RegisterFilesAndAttach() {
  std::vector<int> files = {setup_.char_fd};
  for (int fd : setup_.backend->Files()) files.push_back(fd);
  int rc = io_uring_register_files(ring_->get(), files.data(), static_cast<unsigned>(files.size()));
  if (rc < 0) return absl::ErrnoToStatus(-rc, "io_uring_register_files");
  return setup_.backend->Attach(*ring_, kFirstBackendFileIndex,
                                Completer(&Queue::CompleteFromBackend, this));
}

absl::Status Queue::FetchEveryTag() {
  io_uring_sqe* sqe = ring_->GetSqe();
  io_uring_prep_poll_add(sqe, stop_fd_.get(), POLLIN);
  sqe->user_data = EncodeUserData(CqeKind::kStop, 0);

  const uint32_t fetch_op = setup_.ioctl_encoding ? abi::kUIoFetchReq : abi::kIoFetchReq;
  for (uint16_t tag = 0; tag < setup_.depth; ++tag) {
    sqe = ring_->GetSqe();
    if (sqe == nullptr) return absl::InternalError("no SQE for FETCH_REQ");
    PrepFetch(sqe, tag, fetch_op, 0);
  }
  int rc = io_uring_submit(ring_->get());
  if (rc < 0) return absl::ErrnoToStatus(-rc, "submit FETCH_REQ");
  // A FETCH_REQ the kernel refused completes at once; catch that before START_DEV waits for it.
  io_uring_cqe* cqe = nullptr;
  if (io_uring_peek_cqe(ring_->get(), &cqe) == 0 && cqe != nullptr &&
      KindOf(cqe->user_data) == CqeKind::kUblkCmd && cqe->res < 0) {
    return absl::ErrnoToStatus(-cqe->res, absl::StrCat("FETCH_REQ of tag ", TagOf(cqe->user_data)));
  }
  return absl::OkStatus();
}

absl::Status Queue::PrepareAndFetchBatch() {
  io_uring* ring = ring_->get();
  io_uring_sqe* sqe = ring_->GetSqe();
  io_uring_prep_poll_add(sqe, stop_fd_.get(), POLLIN);
  sqe->user_data = EncodeUserData(CqeKind::kStop, 0);

  commits_ = std::make_unique<BatchCommits>(setup_.queue_id, setup_.depth, setup_.auto_buf_reg,
                                            static_cast<const char*>(buffers_.address()),
                                            setup_.max_io_bytes);
  sqe = ring_->GetSqe();
  commits_->PrepPrepare(sqe, kCharDevFileIndex, EncodeUserData(CqeKind::kBatchPrep, 0));
  int rc = io_uring_submit(ring);
  if (rc < 0) return absl::ErrnoToStatus(-rc, "submit PREP_IO_CMDS");
  // The fetch may only follow a PREP that took every tag (the kernel refuses it while the queue is
  // not ready), and the commits reuse the PREP's buffer.
  io_uring_cqe* cqe = nullptr;
  rc = io_uring_wait_cqe(ring, &cqe);
  if (rc < 0) return absl::ErrnoToStatus(-rc, "wait for PREP_IO_CMDS");
  if (KindOf(cqe->user_data) != CqeKind::kBatchPrep) {
    return absl::InternalError("the first completion of a starting queue is not PREP_IO_CMDS");
  }
  const int32_t prepared = cqe->res;
  io_uring_cqe_seen(ring, cqe);
  if (prepared < 0) {
    return absl::ErrnoToStatus(-prepared, absl::StrCat("PREP_IO_CMDS of ", setup_.depth, " tags"));
  }

  absl::StatusOr<std::unique_ptr<TagBufferRing>> tags =
      TagBufferRing::Register(ring, /*group=*/0, setup_.depth);
  if (!tags.ok()) return tags.status();
  fetch_tags_ = std::move(*tags);
  PrepBatchFetch(ring_->GetSqe());
  rc = io_uring_submit(ring);
  if (rc < 0) return absl::ErrnoToStatus(-rc, "submit FETCH_IO_CMDS");
  // A refused fetch completes at once; catch that before START_DEV waits for it.
  if (io_uring_peek_cqe(ring, &cqe) == 0 && cqe != nullptr &&
      KindOf(cqe->user_data) == CqeKind::kBatchFetch && cqe->res < 0) {
    return absl::ErrnoToStatus(-cqe->res, "FETCH_IO_CMDS");
  }
  return absl::OkStatus();
}

void Queue::PrepBatchFetch(io_uring_sqe* sqe) {
  PrepUblkBatchFetch(sqe, kCharDevFileIndex, setup_.queue_id, fetch_tags_->group(),
                     EncodeUserData(CqeKind::kBatchFetch, 0));
}

bool Queue::Running() const {
  if (stop_requested_ && in_backend_ == 0) return false;
  if (setup_.batch_io) return !(fetch_ended_ && in_backend_ == 0);
  return aborted_ < setup_.depth;
}

void Queue::Loop() {
  io_uring* ring = ring_->get();
  unsigned wait_for = 1;
  bool short_of_sqes = false;
  while (Running()) {
    // Polling enters the kernel without waiting: that submits, and runs the task work that posts
    // completions (none would appear while spinning in user space alone). Work kept for lack of an
    // SQE is retried after a short wait even when nothing completes.
    int rc;
    if (setup_.poll) {
      rc = io_uring_submit_and_get_events(ring);
    } else if (short_of_sqes) {
      __kernel_timespec retry_after{.tv_sec = 0, .tv_nsec = 1'000'000};
      io_uring_cqe* first = nullptr;
      rc = io_uring_submit_and_wait_timeout(ring, &first, wait_for, &retry_after, nullptr);
      if (rc == -ETIME) rc = 0;
    } else {
      rc = io_uring_submit_and_wait(ring, wait_for);
    }
    if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
      loop_status_ =
          absl::ErrnoToStatus(-rc, absl::StrCat("queue ", id(), " io_uring_submit_and_wait"));
      return;
    }
    turn_ns_ = 0;
    turn_local_ = -1;
    unsigned head;
    unsigned seen = 0;
    io_uring_cqe* cqe;
    io_uring_for_each_cqe(ring, head, cqe) {
      ++seen;
      const uint64_t user_data = cqe->user_data;
      switch (KindOf(user_data)) {
        case CqeKind::kUblkCmd:
          OnUblkCompletion(TagOf(user_data), cqe->res);
          break;
        case CqeKind::kBackend:
        case CqeKind::kThrottle:
          setup_.backend->OnCompletion(TagOf(user_data), *cqe);
          break;
        case CqeKind::kResult:
          // Posted by the ring serving this tag, which hands its buffer back with it.
          HappensAfter(ring_.get());
          Complete(TagOf(user_data), cqe->res);
          break;
        case CqeKind::kStop:
          stop_requested_ = true;
          setup_.backend->ReleaseUnstarted(Completer(&Queue::ReleaseFromBackend, this));
          break;
        case CqeKind::kBatchFetch:
          OnBatchFetch(*cqe);
          break;
        case CqeKind::kBatchCommit:
          if (absl::Status committed =
                  commits_->OnCommitted(static_cast<uint8_t>(ExtraOf(user_data)), cqe->res);
              !committed.ok() && loop_status_.ok()) {
            loop_status_ = absl::Status(committed.code(),
                                        absl::StrCat("queue ", id(), ": ", committed.message()));
          }
          break;
        case CqeKind::kBatchPrep:
          break;  // PrepareAndFetchBatch consumed it
      }
    }
    io_uring_cq_advance(ring, seen);
    setup_.backend->EndOfTurn();
    uncommitted_.RetryEach([this](uint32_t tag) { return CommitAndFetch(tag); });
    if (fetch_waits_for_sqe_) fetch_waits_for_sqe_ = !RearmBatchFetch();
    // A COMMIT_IO_CMDS completes while it is submitted: its CQE alone must not end the wait, or
    // every turn costs a second io_uring_enter (at QD1, two per request). Nothing waits for that
    // CQE: the turn's results went with it and the other buffer is free. Should it come later,
    // it still counts towards the two.
    wait_for = commits_ != nullptr && CommitTurn() ? 2 : 1;
    short_of_sqes = ring_->TakeSqeShortage();
    if (setup_.count_io && in_backend_ != published_inflight_) {
      published_inflight_ = in_backend_;
      setup_.stats->counters.inflight.store(in_backend_, std::memory_order_relaxed);
    }
  }
}

void Queue::OnBatchFetch(const io_uring_cqe& cqe) {
  for (const uint16_t tag : fetch_tags_->TagsOf(cqe)) {
    if (tag < setup_.depth) OnUblkCompletion(tag, abi::kIoResOk);
  }
  fetch_tags_->Recycle(cqe);
  if (cqe.flags & IORING_CQE_F_MORE) return;
  // The fetch ended. ABORT: the device is going away. ENOBUFS: no free buffer, or no room in the
  // CQ, when the kernel had tags (it keeps them for the next fetch). Anything else is a refusal.
  if (cqe.res == abi::kIoResAbort || stop_requested_) {
    fetch_ended_ = true;
    return;
  }
  if (cqe.res < 0 && cqe.res != -ENOBUFS) {
    fetch_ended_ = true;
    if (loop_status_.ok()) {
      loop_status_ = absl::ErrnoToStatus(-cqe.res, absl::StrCat("queue ", id(), " FETCH_IO_CMDS"));
    }
    return;
  }
  fetch_waits_for_sqe_ = !RearmBatchFetch();
}

bool Queue::RearmBatchFetch() {
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return false;
  PrepBatchFetch(sqe);
  return true;
}

bool Queue::CommitTurn() {
  if (!commits_->ReadyToCommit()) return false;
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return false;  // the next turn tries again
  commits_->PrepCommit(sqe, kCharDevFileIndex, EncodeUserData(CqeKind::kBatchCommit, 0));
  return true;
}

uint64_t Queue::TurnNs() {
  if (turn_ns_ == 0) turn_ns_ = NowNs();
  return turn_ns_;
}

bool Queue::TurnLocal() {
  if (always_local_) return true;
  if (turn_local_ < 0) {
    // glibc reads the CPU from rseq (or the vDSO): no system call. The whole turn's completions
    // are attributed to this CPU.
    const int cpu = ::sched_getcpu();
    const bool local = cpu >= 0 && CPU_ISSET_S(cpu, sizeof(setup_.hctx_cpus), &setup_.hctx_cpus);
    turn_local_ = local ? 1 : 0;
  }
  return turn_local_ != 0;
}

void Queue::OnUblkCompletion(uint16_t tag, int32_t res) {
  if (res != abi::kIoResOk) {
    // ABORT: the device is going away and this tag is not fetched again. Any other error means the
    // kernel refused the command; the tag is equally dead.
    ++aborted_;
    if (res != abi::kIoResAbort && loop_status_.ok()) {
      loop_status_ = absl::ErrnoToStatus(-res, absl::StrCat("ublk I/O command for tag ", tag));
    }
    return;
  }
  if (stop_requested_) {
    ++held_;
    // A stop is under way: the backend gets nothing new, or under steady load the stop would wait
    // forever. The request stays with the kernel, which requeues it for the next server when the
    // ring closes (USER_RECOVERY_REISSUE) or answers it as the device's mode says.
    return;
  }
  const abi::IoDesc& desc = static_cast<const abi::IoDesc*>(descriptors_.address())[tag];
  BlockIo io;
  io.op = abi::OpOf(desc);
  io.flags = abi::FlagsOf(desc);
  io.offset = desc.start_sector << abi::kSectorShift;
  const uint64_t length = uint64_t{desc.nr_sectors} << abi::kSectorShift;
  io.length = static_cast<uint32_t>(length);
  io.buffer = BufferOf(tag);
  if (setup_.auto_buf_reg || setup_.storage.registered_buffers) io.buffer_index = tag;
  op_of_tag_[tag] = io.op;
  start_ns_of_tag_[tag] = kInTurn;
  ++in_backend_;
  if ((io.op == abi::kIoOpRead || io.op == abi::kIoOpWrite) && length > setup_.max_io_bytes) {
    Complete(tag, -EIO);
    return;
  }
  if (const int32_t refused = AdmitIo(io.op, setup_.read_only, setup_.storage); refused != 0) {
    Complete(tag, refused);
    return;
  }
  setup_.backend->Submit(tag, io);
  // Still with the backend: it outlives this turn, so its latency needs the turn's time.
  if (setup_.count_io && start_ns_of_tag_[tag] == kInTurn) start_ns_of_tag_[tag] = TurnNs();
}

void Queue::ReleaseFromBackend(void* queue, uint16_t /*tag*/, int32_t /*result*/) {
  // Not committed: the kernel keeps the request (see OnUblkCompletion's stop case).
  Queue* self = static_cast<Queue*>(queue);
  --self->in_backend_;
  ++self->held_;
}

void Queue::CompleteFromBackend(void* queue, uint16_t tag, int32_t result) {
  static_cast<Queue*>(queue)->Complete(tag, result);
}

void Queue::Complete(uint16_t tag, int32_t result) {
  --in_backend_;
  if (setup_.count_io) {
    IoCounters& counters = setup_.stats->counters;
    // Not stamped: answered in the turn it arrived in.
    const uint64_t latency_ns =
        start_ns_of_tag_[tag] == kInTurn ? 0 : TurnNs() - start_ns_of_tag_[tag];
    start_ns_of_tag_[tag] = kAnswered;
    counters.Record(KindOfOp(op_of_tag_[tag]), result, latency_ns);
    IoCounters::Bump(TurnLocal() ? counters.local_completions : counters.remote_completions, 1);
  }
  if (commits_ != nullptr) {
    commits_->Add(tag, result);  // committed with the rest of the turn's results (CommitTurn)
    return;
  }
  result_of_tag_[tag] = result;
  if (!CommitAndFetch(tag)) uncommitted_.Add(tag);
}

bool Queue::CommitAndFetch(uint16_t tag) {
  io_uring_sqe* sqe = ring_->GetSqe();
  if (sqe == nullptr) return false;
  const uint32_t op =
      setup_.ioctl_encoding ? abi::kUIoCommitAndFetchReq : abi::kIoCommitAndFetchReq;
  PrepFetch(sqe, tag, op, result_of_tag_[tag]);
  return true;
}

}  // namespace blk::server
