#include "server/nbd/backend.h"

#include "server/nbd/events.h"

namespace blk::server::nbd {

uint64_t Backend::ForwardedRequestUserData(uint32_t slot) {
  return EventUserData(kForwarded, slot);
}

Backend::Backend(std::optional<Connection> connection, const BackendOptions& options,
                 std::unique_ptr<Reconnector> reconnector, std::shared_ptr<Stats> stats)
    : requests_(connection.has_value() ? std::optional<ExportInfo>(connection->info) : std::nullopt,
                options.queue_depth, options.shared, options.durability, options.connection, stats),
      transport_(std::move(connection), requests_, options, std::move(reconnector),
                 std::move(stats)) {}

absl::Status Backend::Attach(Ring& ring, int /*first_file*/, Completer completer) {
  requests_.Attach(ring, completer);
  transport_.Attach(ring);
  return absl::OkStatus();
}

void Backend::Submit(uint16_t tag, const BlockIo& io) { requests_.Submit(tag, io); }

void Backend::EndOfTurn() {
  transport_.RetryWaitingOps();
  requests_.RetryReplies();
  transport_.Kick();
}

void Backend::OnCompletion(uint16_t tag, const io_uring_cqe& cqe) {
  if (tag != kConnectionTag) return;  // every operation of this backend is the connection's
  const uint32_t extra = ExtraOf(cqe.user_data);
  const uint32_t detail = EventDetailOf(extra);
  switch (EventOf(extra)) {
    case kRecv:
      transport_.OnRecv(cqe.res);
      break;
    case kSend:
      transport_.OnSend(cqe.res);
      break;
    case kReconnected:
      transport_.OnReconnected();
      break;
    case kTimer:
      transport_.OnTimer(detail);
      break;
    case kForwarded:
      requests_.OnForwarded(detail);
      break;
    case kReplyFailed:
      requests_.OnReplyFailed(detail, cqe.res);
      break;
  }
}

}  // namespace blk::server::nbd
