// The folder steptrace writes its reports into (captures, hang reports, the Flight Recorder's
// dump): only one of its own user's that no other user may change, held open while written, so a
// folder swapped for a link after the check moves nothing; a name taken gets `-2`, never
// replaced. Ownership cases need root (to give a folder away); run as anyone else they skip.
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "base/own_folder.hpp"
#include "helpers.hpp"
#include "steptrace/output.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr uid_t someone_else = 65534;  // nobody

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// The folder is refused: EPERM, and `words` in what(); nothing is written anywhere under it.
void refused(const fs::path& folder, const std::string& words) {
  try {
    write_report(folder.string(), "report.txt", "text\n");
    FAIL("wrote into " << folder);
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == EPERM);
    CHECK_THAT(e.what(), Contains(folder.string()) && Contains(words));
  }
  CHECK_FALSE(fs::exists(folder / "report.txt"));
}

}  // namespace

TEST_CASE("report folder: made if missing, written whole; a name taken gets -2, -3, never replaced", "[files]") {
  testing::temp_dir dir;
  const fs::path caps = dir.path / "caps";
  CHECK(write_report(caps.string(), "run-hang-step5-pid7.txt", "first\n", true) ==
        (caps / "run-hang-step5-pid7.txt").string());
  CHECK(write_report(caps.string(), "run-hang-step5-pid7.txt", "second\n", true) ==
        (caps / "run-hang-step5-pid7-2.txt").string());
  CHECK(write_report(caps.string(), "flight-recorder-rank0-pid7.pkl", "x", true) ==
        (caps / "flight-recorder-rank0-pid7.pkl").string());
  CHECK(write_report(caps.string(), "flight-recorder-rank0-pid7.pkl", "y", true) ==
        (caps / "flight-recorder-rank0-pid7-2.pkl").string());
  CHECK(write_report(caps.string(), "my.run-pid7.pkl", "a", true) == (caps / "my.run-pid7.pkl").string());
  CHECK(write_report(caps.string(), "my.run-pid7.pkl", "b", true) ==
        (caps / "my.run-pid7-2.pkl").string());  // a dot of its own kept
  CHECK(read_all(caps / "run-hang-step5-pid7.txt") == "first\n");
  CHECK(read_all(caps / "run-hang-step5-pid7-2.txt") == "second\n");
  // not fresh: the same name replaced (a report the job's view is added to)
  write_report(caps.string(), "run-hang-step5-pid7.txt", "again\n");
  CHECK(read_all(caps / "run-hang-step5-pid7.txt") == "again\n");
  // a link planted at a fresh name is left as it is, not written through
  fs::create_symlink(dir.path / "elsewhere", caps / "taken.txt");
  CHECK(write_report(caps.string(), "taken.txt", "z", true) == (caps / "taken-2.txt").string());
  CHECK_FALSE(fs::exists(dir.path / "elsewhere"));
  std::size_t temporaries = 0;
  for (const auto& e : fs::directory_iterator(caps))
    temporaries += e.path().filename().string().rfind(".steptrace-", 0) == 0;
  CHECK(temporaries == 0);
}

TEST_CASE("report folder: one anyone can change is refused, even one's own; one with the sticky bit is not",
          "[files]") {
  testing::temp_dir dir;
  const fs::path open = dir.path / "open";
  fs::create_directory(open);
  ::chmod(open.c_str(), 0777);
  refused(open, "can be changed by anyone (world-writable, no sticky bit)");
  ::chmod(open.c_str(), 01777);
  CHECK_NOTHROW(write_report(open.string(), "report.txt", "ok\n"));
}

TEST_CASE("report folder: another user's folder, or a link of theirs to one's own, is refused", "[files]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot give a folder to another user here");
    return;
  }
  testing::temp_dir dir;
  ::chmod(dir.path.c_str(), 01777);  // a shared working folder
  const fs::path theirs = dir.path / "steptrace-captures";
  fs::create_directory(theirs);
  REQUIRE(::chown(theirs.c_str(), someone_else, someone_else) == 0);  // another user made it first
  refused(theirs, "belongs to another user (uid 65534)");
  const fs::path mine = dir.path / "mine";
  fs::create_directory(mine);
  const fs::path link = dir.path / "caps";
  fs::create_symlink(mine, link);
  REQUIRE(::lchown(link.c_str(), someone_else, someone_else) == 0);
  refused(link, "a symbolic link owned by another user (uid 65534)");
  CHECK(fs::is_empty(mine));
}

TEST_CASE("report folder: swapped for a link once checked, the file still lands in the folder checked", "[files]") {
  testing::temp_dir dir;
  const fs::path caps = dir.path / "caps", secret = dir.path / "secret";
  fs::create_directory(secret);
  const detail::own_folder folder(caps.string());
  fs::rename(caps, dir.path / "moved");  // the swap: the checked folder moved away, a link in its place
  fs::create_symlink(secret, caps);
  folder.write("report.txt", "text\n");
  folder.write_new("hang", ".txt", [](const std::string&) { return std::string("hang\n"); });
  CHECK(fs::is_empty(secret));
  CHECK(read_all(dir.path / "moved" / "report.txt") == "text\n");
  CHECK(read_all(dir.path / "moved" / "hang.txt") == "hang\n");
}
