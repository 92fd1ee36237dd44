// libFuzzer target: persisted volume records (agent/volume_record), read back from whatever the
// state directory holds after a crash or a lying disk. A record that decodes re-encodes to a
// record that decodes to the same volume and device id, and re-encoding that gives the same
// bytes (saving what was loaded changes nothing).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "agent/volumes/volume_record.h"
#include "google/protobuf/util/message_differencer.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // First byte: the length of the id the file name gives; then the id; then the file's text.
  if (size < 1) return 0;
  const size_t id_length = data[0] % 32;
  if (size < 1 + id_length) return 0;
  const std::string id(reinterpret_cast<const char*>(data + 1), id_length);
  const std::string text(reinterpret_cast<const char*>(data + 1 + id_length), size - 1 - id_length);
  absl::StatusOr<blk::agent::VolumeRecord> record = blk::agent::DecodeVolumeRecord(text, id);
  if (!record.ok()) {
    if (record.status().message().empty()) abort();
    return 0;
  }
  if (record->spec.id() != id || record->device_id < -1) abort();
  const std::string encoded = blk::agent::EncodeVolumeRecord(*record);
  absl::StatusOr<blk::agent::VolumeRecord> again = blk::agent::DecodeVolumeRecord(encoded, id);
  if (!again.ok()) abort();
  blk::v1::Volume stored = record->spec;
  stored.clear_status();  // not persisted
  if (!google::protobuf::util::MessageDifferencer::Equals(again->spec, stored)) abort();
  if (again->device_id != record->device_id) abort();
  if (blk::agent::EncodeVolumeRecord(*again) != encoded) abort();
  return 0;
}
