#pragma once

#include <sched.h>

#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/unique_fd.h"
#include "server/backend.h"
#include "server/mapping.h"
#include "server/ublk/abi.h"
#include "server/ublk/batch_io.h"
#include "server/ublk/queue_stats.h"
#include "server/ublk/ring.h"
#include "server/ublk/sqe_waitlist.h"

namespace blk::server {

struct QueueSetup {
  uint32_t device_id = 0;  // N of /dev/ublkcN, for the thread's name
  uint16_t queue_id = 0;
  uint16_t depth = 0;
  uint32_t max_io_bytes = 0;
  int char_fd = -1;             // /dev/ublkcN, owned by the device
  bool ioctl_encoding = false;  // UBLK_U_IO_* opcodes instead of the legacy ones
  cpu_set_t hctx_cpus{};        // the CPUs whose I/O the kernel sends to this queue
  cpu_set_t thread_cpus{};      // where the thread runs (see QueuePlacement); empty: no pinning
  std::unique_ptr<Backend> backend;
  bool read_only = false;       // writes, discards and write-zeroes fail with EROFS (AdmitIo)
  QueueStats* stats = nullptr;  // where the queue publishes its counters; outlives the queue
  bool count_io = true;         // false: no per-I/O statistics at all (their cost measured off)
  StorageTraits storage;        // the ring the backend needs
  // UBLK_F_AUTO_BUF_REG: each request's pages are registered buffer <tag> of the ring, no copy.
  bool auto_buf_reg = false;
  bool poll = false;  // busy-poll the ring instead of sleeping in io_uring_enter
  // UBLK_F_BATCH_IO: one PREP_IO_CMDS, a multishot FETCH_IO_CMDS and one COMMIT_IO_CMDS per loop
  // turn instead of a FETCH_REQ / COMMIT_AND_FETCH_REQ per tag (needs the ioctl encoding).
  bool batch_io = false;
  // Kernels before 6.15 may cancel a fetch while the work that hands it a request is still pending,
  // and then oops (io_ring_exit_work: a request freed twice). On those a stopping thread keeps its
  // ring, running that work, until the kernel stopped handing it requests (AwaitLastDispatch).
  bool cancel_races_dispatch = false;
};

// One ublk queue: a thread named "blkq<device>-<queue>" and pinned to its CPUs, owning one io_uring
// that carries both the ublk I/O commands and the backend's I/O. The loop: fetch, hand to the
// backend, and when the backend completes the tag (through the Completer it got at Attach),
// commit the result, which fetches the tag's next request.
class Queue {
 public:
  // Starts the thread and returns once it has a FETCH_REQ pending for every tag, or (batch) every
  // tag prepared and the FETCH_IO_CMDS pending (START_DEV waits for exactly that), or the reason
  // it could not.
  static absl::StatusOr<std::unique_ptr<Queue>> Start(QueueSetup setup);
  ~Queue();
  Queue(const Queue&) = delete;
  Queue& operator=(const Queue&) = delete;

  // Asks the thread to leave as soon as no backend I/O is in flight; from then on it hands no new
  // request to the backend (they stay with the kernel, see OnUblkCompletion). Its pending fetches
  // are cancelled when its ring closes. For stops where the kernel never aborts the fetches.
  void RequestStop();
  // Waits for the thread to end (it also ends by itself once the kernel aborted every tag).
  void Join();

  uint16_t id() const { return setup_.queue_id; }
  const cpu_set_t& hctx_cpus() const { return setup_.hctx_cpus; }
  const cpu_set_t& thread_cpus() const { return setup_.thread_cpus; }
  bool pinned() const { return pinned_.load(std::memory_order_relaxed); }
  // Why the loop ended early, if it did (valid after Join).
  absl::Status loop_status() const { return loop_status_; }

 private:
  explicit Queue(QueueSetup setup);
  void Run(std::promise<absl::Status>* started);
  // Prepare's steps, in this order.
  absl::Status Prepare();
  void NameAndPinThread();
  absl::Status MapDescriptorsAndBuffers();
  absl::Status CreateRing();
  absl::Status RegisterBuffers();
  absl::Status RegisterFilesAndAttach();
  absl::Status FetchEveryTag();
  // FetchEveryTag's batch form: PREP_IO_CMDS for every tag, then the multishot FETCH_IO_CMDS.
  absl::Status PrepareAndFetchBatch();
  void PrepBatchFetch(io_uring_sqe* sqe);

  void Loop();
  // Whether the loop goes on: not once a requested stop has no backend I/O left, nor once the
  // kernel ended every command (classic: every tag aborted; batch: the fetch ended) and every
  // fetched request is answered.
  bool Running() const;
  // A FETCH_IO_CMDS CQE: each tag it delivers as a fetched request; re-armed when it ended
  // without an abort.
  void OnBatchFetch(const io_uring_cqe& cqe);
  // A new FETCH_IO_CMDS after one ended; false when no SQE was free (fetch_waits_for_sqe_).
  bool RearmBatchFetch();
  // Once per turn (batch): this turn's results in one COMMIT_IO_CMDS. Whether it prepared one.
  bool CommitTurn();
  void OnUblkCompletion(uint16_t tag, int32_t res);
  // The tag's request is done: counters, then COMMIT_AND_FETCH_REQ with its result.
  void Complete(uint16_t tag, int32_t result);
  // COMMIT_AND_FETCH_REQ of the tag's result; false when no SQE was free (it waits in
  // uncommitted_ for the next turn).
  bool CommitAndFetch(uint16_t tag);
  static void CompleteFromBackend(void* queue, uint16_t tag, int32_t result);
  // A request the backend hands back unstarted at a stop (Backend::ReleaseUnstarted).
  static void ReleaseFromBackend(void* queue, uint16_t tag, int32_t result);
  // The time and the locality this turn's requests are attributed to, each read at most once per
  // turn and only when a statistic needs it: requests answered in the turn they arrived in (the
  // null backend's, refusals) need neither clock nor CPU.
  uint64_t TurnNs();
  bool TurnLocal();
  char* BufferOf(uint16_t tag) const;
  // See QueueSetup::cancel_races_dispatch.
  void AwaitLastDispatch();
  // FETCH_REQ or COMMIT_AND_FETCH_REQ for `tag` (copy mode: with its buffer).
  void PrepFetch(io_uring_sqe* sqe, uint16_t tag, uint32_t op, int32_t result);

  QueueSetup setup_;
  UniqueFd stop_fd_;  // eventfd the ring polls
  std::thread thread_;
  std::atomic<bool> pinned_{false};
  absl::Status loop_status_;

  // Owned by the queue thread.
  // Declared before ring_: the kernel may write tags into these buffers until the ring is gone.
  std::unique_ptr<TagBufferRing> fetch_tags_;  // batch only
  std::unique_ptr<Ring> ring_;
  std::unique_ptr<BatchCommits> commits_;  // batch only
  bool fetch_ended_ = false;               // batch: FETCH_IO_CMDS ended and is not re-armed
  bool fetch_waits_for_sqe_ = false;       // batch: it is to be re-armed once an SQE is free
  Mapping descriptors_;
  Mapping buffers_;
  std::vector<uint8_t> op_of_tag_;  // op in flight, for the counters
  // Per tag: when its request arrived, stamped only once it outlived that turn's submit.
  std::vector<uint64_t> start_ns_of_tag_;
  uint64_t turn_ns_ = 0;       // CLOCK_MONOTONIC of this turn; 0: not read yet
  int8_t turn_local_ = -1;     // this turn runs on a CPU of the hctx set; -1: not asked yet
  bool always_local_ = false;  // pinned inside the hctx set: every turn is local
  uint32_t published_inflight_ = 0;
  uint32_t in_backend_ = 0;  // tags fetched and not completed yet
  // Results not committed yet for lack of an SQE (classic mode), and each tag's result.
  SqeWaitlist uncommitted_;
  std::vector<int32_t> result_of_tag_;
  uint32_t aborted_ = 0;
  uint32_t held_ = 0;  // requests fetched during a stop, or released unstarted, left to the kernel
  bool stop_requested_ = false;
};

}  // namespace blk::server
