//===- TensorBoard.h - TensorBoard event files of kiln-run -------*- C++
//-*-===//
//
// kiln-run --tensorboard DIR writes each step's scalars as TensorBoard reads
// them: an event file (TFRecord framing: length, masked CRC-32C of the
// length, the record, its masked CRC-32C) of serialized tensorflow.Event
// messages, the first naming the file version, then one per step with a
// Summary of simple values. No TensorFlow or protobuf schema is needed: the
// few fields are encoded here.
//
//===----------------------------------------------------------------------===//

#ifndef KILN_TOOLS_KILN_RUN_TENSORBOARD_H
#define KILN_TOOLS_KILN_RUN_TENSORBOARD_H

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln::run {

/// CRC-32C (Castagnoli) of `size` bytes.
uint32_t crc32c(const void *data, size_t size);

/// A TFRecord of `payload`: what TensorBoard's reader checks.
std::string tfRecord(const std::string &payload);

/// A serialized tensorflow.Event of scalars: wall_time, step and a Summary
/// of (tag, simple_value) pairs.
std::string
scalarEvent(double wallTime, int64_t step,
            const std::vector<std::pair<std::string, float>> &values);

class TensorBoardWriter {
public:
  ~TensorBoardWriter();

  /// Creates DIR if needed and a new event file in it (never an existing
  /// one: a resumed run writes a file of its own, and TensorBoard drops the
  /// earlier file's steps after the resumed step). "" writes nothing.
  bool open(const std::string &dir);
  bool append(int64_t step,
              const std::vector<std::pair<std::string, float>> &values);
  bool sync();

private:
  bool write(const std::string &record);

  std::string path;
  int fd = -1;
};

} // namespace kiln::run

#endif // KILN_TOOLS_KILN_RUN_TENSORBOARD_H
