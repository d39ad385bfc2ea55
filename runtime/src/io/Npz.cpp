//===- Npz.cpp - NumPy .npz archives through libzip -----------------------===//

#include "kiln/runtime/Npy.h"

#include "io/NpyStream.h"

#include <zip.h>

#include <memory>
#include <set>

namespace kiln::runtime {

namespace {

constexpr char kNpySuffix[] = ".npy";
constexpr size_t kNpySuffixSize = 4;

std::string zipErrorText(int code) {
  zip_error_t error;
  zip_error_init_with_code(&error, code);
  std::string text = zip_error_strerror(&error);
  zip_error_fini(&error);
  return text;
}

struct ZipArchiveCloser {
  void operator()(zip_t *archive) const { zip_discard(archive); }
};
using ZipArchive = std::unique_ptr<zip_t, ZipArchiveCloser>;

/// One archive entry, read through libzip (which inflates and checks its
/// CRC-32).
class ZipEntryStream : public NpyStream {
public:
  ~ZipEntryStream() override {
    if (file)
      zip_fclose(file);
  }

  Status open(zip_t *archive, zip_uint64_t index, uint64_t size) {
    file = zip_fopen_index(archive, index, 0);
    if (!file)
      return formatError("cannot open the entry: ", zip_strerror(archive));
    left = size;
    return Status();
  }

  Status read(void *data, size_t size) override {
    if (size > left)
      return formatError("truncated: ", size, " more bytes expected, ", left,
                         " left");
    auto *bytes = static_cast<uint8_t *>(data);
    size_t done = 0;
    while (done < size) {
      zip_int64_t got = zip_fread(file, bytes + done, size - done);
      if (got <= 0)
        return formatError("cannot read the entry: ", zip_file_strerror(file));
      done += static_cast<size_t>(got);
    }
    left -= size;
    return Status();
  }

  /// Reads past the end, which makes libzip verify the entry's CRC-32.
  Status finish() {
    uint8_t extra;
    zip_int64_t got = zip_fread(file, &extra, 1);
    if (got < 0)
      return formatError("corrupt entry: ", zip_file_strerror(file));
    if (got > 0)
      return formatError("the entry holds more bytes than it declares");
    return Status();
  }

private:
  zip_file_t *file = nullptr;
};

/// The array name of entry `entryName`, which must end in ".npy".
Status arrayName(const std::string &entryName, std::string &name) {
  size_t size = entryName.size();
  if (size <= kNpySuffixSize ||
      entryName.compare(size - kNpySuffixSize, kNpySuffixSize, kNpySuffix) != 0)
    return formatError("entry '", entryName, "' is not an .npy array");
  name = entryName.substr(0, size - kNpySuffixSize);
  return Status();
}

Status readEntry(zip_t *archive, zip_uint64_t index, NamedArray &out) {
  zip_stat_t stat;
  zip_stat_init(&stat);
  if (zip_stat_index(archive, index, 0, &stat) != 0 ||
      !(stat.valid & ZIP_STAT_NAME) || !(stat.valid & ZIP_STAT_SIZE))
    return formatError("entry ", index, ": ", zip_strerror(archive));
  KILN_RETURN_IF_ERROR(arrayName(stat.name, out.name));
  ZipEntryStream in;
  KILN_RETURN_IF_ERROR(in.open(archive, index, stat.size)
                           .withContext(strCat("array '", out.name, "'")));
  KILN_RETURN_IF_ERROR(
      readNpy(in, out.array).withContext(strCat("array '", out.name, "'")));
  return in.finish().withContext(strCat("array '", out.name, "'"));
}

/// Adds one array as NAME.npy, its header and data as two fragments that
/// the archive reads when it is closed.
Status addEntry(zip_t *archive, const NamedArray &entry,
                const std::string &header, bool compress) {
  zip_buffer_fragment_t fragments[2] = {
      {reinterpret_cast<zip_uint8_t *>(const_cast<char *>(header.data())),
       header.size()},
      {const_cast<uint8_t *>(entry.array.data.data()),
       entry.array.data.size()}};
  zip_uint64_t fragmentCount = entry.array.data.size() > 0 ? 2 : 1;
  zip_source_t *source =
      zip_source_buffer_fragment(archive, fragments, fragmentCount, 0);
  if (!source)
    return ioError(zip_strerror(archive));
  std::string entryName = entry.name + kNpySuffix;
  zip_int64_t index =
      zip_file_add(archive, entryName.c_str(), source, ZIP_FL_ENC_UTF_8);
  if (index < 0) {
    zip_source_free(source);
    return ioError(zip_strerror(archive));
  }
  if (zip_set_file_compression(archive, static_cast<zip_uint64_t>(index),
                               compress ? ZIP_CM_DEFLATE : ZIP_CM_STORE,
                               0) != 0)
    return ioError(zip_strerror(archive));
  return Status();
}

/// libzip removes an archive without entries instead of writing it; an
/// empty .npz is just the end-of-central-directory record.
Status writeEmptyArchive(const std::string &path) {
  static const uint8_t kEmptyZip[22] = {'P', 'K', 5, 6};
  return writeFileReplacing(path, {ByteSpan(kEmptyZip, sizeof(kEmptyZip))});
}

} // namespace

Status readNpz(const std::string &path, std::vector<NamedArray> &out) {
  int code = 0;
  ZipArchive archive(zip_open(path.c_str(), ZIP_RDONLY | ZIP_CHECKCONS, &code));
  if (!archive)
    return (code == ZIP_ER_OPEN || code == ZIP_ER_NOENT || code == ZIP_ER_READ
                ? ioError(path, ": ", zipErrorText(code))
                : formatError(path, ": not a valid .npz archive: ",
                              zipErrorText(code)));
  zip_int64_t count = zip_get_num_entries(archive.get(), 0);
  std::vector<NamedArray> arrays(static_cast<size_t>(count < 0 ? 0 : count));
  std::set<std::string> names;
  for (zip_int64_t i = 0; i < count; ++i) {
    NamedArray &array = arrays[static_cast<size_t>(i)];
    KILN_RETURN_IF_ERROR(
        readEntry(archive.get(), static_cast<zip_uint64_t>(i), array)
            .withContext(path));
    if (!names.insert(array.name).second)
      return formatError(path, ": array '", array.name, "' appears twice");
  }
  out = std::move(arrays);
  return Status();
}

Status writeNpz(const std::string &path, const std::vector<NamedArray> &arrays,
                bool compress) {
  if (arrays.empty())
    return writeEmptyArchive(path);
  std::vector<std::string> headers(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i)
    KILN_RETURN_IF_ERROR(
        encodeNpyHeader(arrays[i].array.elementType, arrays[i].array.shape,
                        headers[i])
            .withContext(strCat(path, ": array '", arrays[i].name, "'")));
  int code = 0;
  ZipArchive archive(zip_open(path.c_str(), ZIP_CREATE | ZIP_TRUNCATE, &code));
  if (!archive)
    return ioError(path, ": cannot create: ", zipErrorText(code));
  for (size_t i = 0; i < arrays.size(); ++i)
    KILN_RETURN_IF_ERROR(
        addEntry(archive.get(), arrays[i], headers[i], compress)
            .withContext(strCat(path, ": array '", arrays[i].name, "'")));
  // zip_close writes a temporary file and renames it over `path`.
  if (zip_close(archive.get()) != 0)
    return ioError(path, ": cannot write: ", zip_strerror(archive.get()));
  archive.release();
  return Status();
}

} // namespace kiln::runtime
