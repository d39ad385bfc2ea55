//===- OpenWrittenBundle.h - a test bundle opened through the C API -*- C++
//-*-===//

#ifndef KILN_TEST_RUNTIME_OPENWRITTENBUNDLE_H
#define KILN_TEST_RUNTIME_OPENWRITTENBUNDLE_H

#include "TestBundles.h"
#include "kiln/runtime.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include <unistd.h>

namespace kiln::runtime::testing {

/// Writes `writer`'s bundle to $TMPDIR (or /tmp)/`stem`-PID.kiln, opens it
/// through the C API into `*out` and removes the file: the open bundle has
/// mapped what it reads. Fails the calling test (fatally: wrap the call in
/// ASSERT_NO_FATAL_FAILURE) when either step fails.
inline void openWrittenBundle(BundleWriter &writer, const std::string &stem,
                              kiln_bundle_t **out) {
  const char *base = std::getenv("TMPDIR");
  std::string path = std::string(base && *base ? base : "/tmp") + "/" + stem +
                     "-" + std::to_string(getpid()) + ".kiln";
  Status written = writer.write(path);
  ASSERT_TRUE(written.ok()) << written.message();
  kiln_status_t opened = kiln_bundle_open(path.c_str(), out);
  std::remove(path.c_str());
  ASSERT_EQ(opened, KILN_OK) << kiln_status_message();
}

} // namespace kiln::runtime::testing

#endif // KILN_TEST_RUNTIME_OPENWRITTENBUNDLE_H
