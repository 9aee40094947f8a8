#include <caffe2/serialize/inline_container.h>
#include <caffe2/serialize/read_adapter_interface.h>
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>

#include "gputrain/common/error.h"
#include "module_io.h"

namespace gputrain::checkpoint::detail {

namespace {

// The archive's bytes where they lie, for the zip reader: no copy.
class BytesReader final : public caffe2::serialize::ReadAdapterInterface {
 public:
  explicit BytesReader(std::string_view bytes) : bytes_(bytes) {}
  size_t size() const override { return bytes_.size(); }
  size_t read(uint64_t pos, void* buf, size_t n, const char* /*what*/) const override {
    if (pos >= bytes_.size()) return 0;
    n = std::min<size_t>(n, bytes_.size() - pos);
    std::memcpy(buf, bytes_.data() + pos, n);
    return n;
  }

 private:
  std::string_view bytes_;
};

// A little-endian unsigned length of `width` bytes at `at`.
uint64_t length_at(std::string_view pickle, std::size_t at, std::size_t width) {
  uint64_t value = 0;
  for (std::size_t i = 0; i < width; ++i) value |= uint64_t{static_cast<uint8_t>(pickle[at + i])} << (8 * i);
  return value;
}

// What follows an opcode: a fixed-size argument, then a length of
// `length_width` bytes and that many bytes.
struct Argument {
  std::size_t fixed = 0;
  std::size_t length_width = 0;
};

// The argument of each opcode LibTorch's Unpickler reads, and of the other
// length-prefixed opcodes of pickle protocol 4 so that none slips past
// unchecked; nullopt for the rest, which LibTorch refuses.
std::optional<Argument> argument_of(uint8_t opcode) {
  // EMPTY_LIST EMPTY_TUPLE MARK NEWTRUE NEWFALSE NONE TUPLE TUPLE1-3 EMPTY_DICT
  // APPENDS LIST DICT SETITEMS NEWOBJ BUILD REDUCE BINPERSID SETITEM
  constexpr std::array<uint8_t, 20> kBare{']', ')', '(', 0x88, 0x89, 'N',  't', 0x85, 0x86, 0x87,
                                          '}', 'e', 'l', 'd',  'u',  0x81, 'b', 'R',  'Q',  's'};
  if (std::find(kBare.begin(), kBare.end(), opcode) != kBare.end()) return Argument{};
  switch (opcode) {
    case 0x80:  // PROTO
    case 'q':   // BINPUT
    case 'K':   // BININT1
    case 'h':   // BINGET
      return Argument{1, 0};
    case 'M':  // BININT2
      return Argument{2, 0};
    case 'r':  // LONG_BINPUT
    case 'J':  // BININT
    case 'j':  // LONG_BINGET
      return Argument{4, 0};
    case 'G':   // BINFLOAT
    case 0x95:  // FRAME: its length covers the opcodes that follow
      return Argument{8, 0};
    case 0x8a:  // LONG1
    case 0x8c:  // SHORT_BINUNICODE
    case 'C':   // SHORT_BINBYTES
      return Argument{0, 1};
    case 'X':   // BINUNICODE
    case 'B':   // BINBYTES
    case 0x8b:  // LONG4
      return Argument{0, 4};
    case 0x8d:  // BINUNICODE8
    case 0x8e:  // BINBYTES8
      return Argument{0, 8};
    default:
      return std::nullopt;
  }
}

// Walks `pickle` opcode by opcode as LibTorch's Unpickler reads it and refuses
// the first length that runs past the record, or memo slot beyond its size. The walk stops where LibTorch's
// read would stop with an error of its own (an opcode it does not know, bytes
// missing), so everything LibTorch reads has been checked first.
void check_lengths(std::string_view pickle, const std::string& record, const std::string& name) {
  std::size_t at = 0;
  const auto skip_line = [&] {  // GLOBAL's module and class names, each ended by a newline
    const std::size_t end = pickle.find('\n', at);
    if (end == std::string_view::npos) return false;
    at = end + 1;
    return true;
  };
  while (at < pickle.size()) {
    const auto opcode = static_cast<uint8_t>(pickle[at++]);
    if (opcode == '.') return;  // STOP
    if (opcode == 'c') {        // GLOBAL
      if (!skip_line() || !skip_line()) return;
      continue;
    }
    const std::optional<Argument> argument = argument_of(opcode);
    if (!argument || pickle.size() - at < argument->fixed + argument->length_width) return;
    // LibTorch grows its memo to the slot LONG_BINPUT names; a pickler numbers
    // slots from 0, one per put of at least two bytes.
    if (opcode == 'r' && length_at(pickle, at, 4) > pickle.size()) {
      throw CheckpointError(fmt::format(
          "{}: its {} puts a value in memo slot {}, more than its {} bytes can number: the file is damaged or was "
          "not written by PyTorch; write it again",
          name, record, length_at(pickle, at, 4), pickle.size()));
    }
    at += argument->fixed;
    if (argument->length_width == 0) continue;
    const uint64_t length = length_at(pickle, at, argument->length_width);
    at += argument->length_width;
    if (length > pickle.size() - at) {
      throw CheckpointError(fmt::format(
          "{}: its {} declares a string of {} bytes where {} remain: the file is damaged or was not written by "
          "PyTorch; write it again",
          name, record, length, pickle.size() - at));
    }
    at += length;
  }
}

bool is_pickle(const std::string& record) {
  return record.size() >= 3 && record.compare(record.size() - 3, 3, "pkl") == 0;
}

}  // namespace

void check_pickle_lengths(std::string_view archive, const std::string& name) {
  caffe2::serialize::PyTorchStreamReader zip(std::make_shared<BytesReader>(archive));
  for (const std::string& record : zip.getAllRecords()) {
    // PyTorch stores records uncompressed, and LibTorch reserves a record's
    // declared size before reading it: one longer than the archive is crafted.
    if (zip.getRecordSize(record) > archive.size()) {
      throw CheckpointError(fmt::format("{}: its record {} declares {} bytes in an archive of {}; write it again", name,
                                        record, zip.getRecordSize(record), archive.size()));
    }
    if (!is_pickle(record)) continue;
    auto [data, size] = zip.getRecord(record);
    check_lengths(std::string_view(static_cast<const char*>(data.get()), size), record, name);
  }
}

}  // namespace gputrain::checkpoint::detail
