// Where steptrace's outputs may go: a symbolic link or file another user planted at an output
// path is refused with why and left as it was; a link of one's own is followed and the file it
// replaces keeps its mode; a FIFO nobody reads is an error, never a hang. Ownership cases need
// root (to give a link away); run as anyone else they say so and skip.
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>

#include "base/whole_file.hpp"
#include "steptrace/steptrace.hpp"

using namespace steptrace;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

constexpr uid_t someone_else = 65534;  // nobody

fs::path fresh_folder(const std::string& name, mode_t mode = 0755) {
  const fs::path dir = fs::temp_directory_path() / ("steptrace-out-" + name + "-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  ::chmod(dir.c_str(), mode);
  return dir;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void put(const fs::path& p, const std::string& text, mode_t mode = 0600) {
  std::ofstream(p, std::ios::binary) << text;
  ::chmod(p.c_str(), mode);
}

mode_t mode_of(const fs::path& p) {
  struct stat st {};
  REQUIRE(::stat(p.c_str(), &st) == 0);
  return st.st_mode & 07777;
}

std::size_t temporaries_in(const fs::path& dir) {
  std::size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().rfind(".steptrace-", 0) == 0;
  return n;
}

// write_file's refusal: EPERM, the path and `words` in what(); and the same for the JSON lines.
void refused(const fs::path& path, const std::string& words) {
  try {
    write_file(path.string(), "replaced\n");
    FAIL("wrote through " << path);
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == EPERM);
    CHECK_THAT(e.what(), Contains(path.string()) && Contains(words));
    CHECK_THAT(e.what(), !Contains("Operation not permitted"));
  }
  std::string why;
  CHECK(detail::append_whole_line(path.string(), "{}\n", &why) == EPERM);
  CHECK_THAT(why, Contains(words));
  try {  // the public append (Python's JSONL lines): the same refusal, said the same way
    append_line(path.string(), "{}\n");
    FAIL("appended through " << path);
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == EPERM);
    CHECK_THAT(e.what(), Contains(path.string()) && Contains(words) && !Contains("Operation not permitted"));
  }
}

}  // namespace

TEST_CASE("outputs: a link another user planted in a shared folder is refused, the file it names untouched",
          "[files]") {
  if (::geteuid() != 0) {
    WARN("not root: cannot give a link to another user here");
    return;
  }
  const fs::path shared = fresh_folder("shared", 01777), home = fresh_folder("home", 0700);
  put(home / "secret", "secret\n", 0600);
  const fs::path planted = shared / "run.json";
  fs::create_symlink(home / "secret", planted);
  REQUIRE(::lchown(planted.c_str(), someone_else, someone_else) == 0);
  refused(planted, "a symbolic link owned by another user (uid 65534)");
  CHECK(read_all(home / "secret") == "secret\n");
  CHECK(mode_of(home / "secret") == 0600);
  CHECK(fs::is_symlink(planted));
  CHECK(temporaries_in(shared) + temporaries_in(home) == 0);

  SECTION("a chain of links is held to the rule at every link") {
    const fs::path mine = home / "mine.json";
    fs::create_symlink(planted, mine);  // mine -> the planted link -> the secret
    refused(mine, "owned by another user");
    CHECK(read_all(home / "secret") == "secret\n");
  }
  SECTION("a folder on the way that is another user's link is held to the same rule") {
    const fs::path runs = shared / "runs";
    fs::create_directory_symlink(home, runs);  // /tmp/runs -> the victim's folder
    REQUIRE(::lchown(runs.c_str(), someone_else, someone_else) == 0);
    refused(runs / "secret", "the folder " + runs.string() + " on its path is a symbolic link owned by another user");
    refused(runs / "new.json", "on its path is a symbolic link owned by another user");
    CHECK(read_all(home / "secret") == "secret\n");
    CHECK_FALSE(fs::exists(home / "new.json"));
  }
  SECTION("a file or a FIFO another user left there is neither replaced nor written") {
    put(shared / "left.json", "theirs\n", 0666);
    REQUIRE(::chown((shared / "left.json").c_str(), someone_else, someone_else) == 0);
    refused(shared / "left.json", "owned by another user (uid 65534) in a folder anyone can write");
    CHECK(read_all(shared / "left.json") == "theirs\n");
    REQUIRE(::mkfifo((shared / "fifo.json").c_str(), 0666) == 0);
    REQUIRE(::chown((shared / "fifo.json").c_str(), someone_else, someone_else) == 0);
    refused(shared / "fifo.json", "owned by another user");
  }
  SECTION("root's own link (as /dev/stdout is) and a link of one's own are followed") {
    const fs::path own = shared / "own.json";
    fs::create_symlink(home / "secret", own);
    write_file(own.string(), "new\n");
    CHECK(read_all(home / "secret") == "new\n");
    append_line(own.string(), "line\n");
    CHECK(read_all(home / "secret") == "new\nline\n");
    CHECK(mode_of(home / "secret") == 0600);  // the file replaced keeps its mode
    CHECK(fs::is_symlink(own));
  }
  fs::remove_all(shared);
  fs::remove_all(home);
}

TEST_CASE("outputs: a temporary's name taken in advance is passed over; a hard link in a shared folder is refused",
          "[files]") {
  const fs::path shared = fresh_folder("taken", 01777), home = fresh_folder("home3", 0700);
  put(home / "target", "kept\n");
  for (int n = 0; n < 200; ++n) {  // every name this process could pick next, as links to the target
    fs::create_symlink(home / "target",
                       shared / (".steptrace-" + std::to_string(::getpid()) + "-" + std::to_string(n) + ".tmp"));
  }
  write_file((shared / "a.json").string(), "a\n");  // the name is random: none of them is picked
  write_file((shared / "b.json").string(), "b\n");
  CHECK(read_all(shared / "b.json") == "b\n");
  CHECK(read_all(home / "target") == "kept\n");
  put(home / "other", "other\n");
  fs::create_hard_link(home / "other", shared / "live.jsonl");
  refused(shared / "live.jsonl", "a file with 2 hard links in a folder anyone can write");
  CHECK(read_all(home / "other") == "other\n");
  fs::remove_all(shared);
  fs::remove_all(home);
}

TEST_CASE("outputs: a link in a folder anyone can change (no sticky bit) is refused, even one's own", "[files]") {
  const fs::path open_dir = fresh_folder("open", 0777), home = fresh_folder("home2", 0700);
  put(home / "target.json", "kept\n");
  fs::create_symlink(home / "target.json", open_dir / "run.json");
  refused(open_dir / "run.json", "a symbolic link in a folder anyone can change");
  CHECK(read_all(home / "target.json") == "kept\n");
  fs::remove_all(open_dir);
  fs::remove_all(home);
}

TEST_CASE("outputs: one's own link is written through; the file replaced keeps its mode", "[files]") {
  const fs::path dir = fresh_folder("own");
  put(dir / "run.json", "old\n", 0640);
  fs::create_symlink("run.json", dir / "latest.json");  // relative, as `ln -s` makes them
  fs::create_symlink(dir / "latest.json", dir / "alias.json");
  write_file((dir / "alias.json").string(), "new\n");
  CHECK(read_all(dir / "run.json") == "new\n");
  CHECK(mode_of(dir / "run.json") == 0640);
  CHECK(fs::is_symlink(dir / "latest.json"));
  CHECK(fs::is_symlink(dir / "alias.json"));
  REQUIRE(detail::append_whole_line((dir / "alias.json").string(), "{}\n") == 0);
  CHECK(read_all(dir / "run.json") == "new\n{}\n");
  write_file((dir / "fresh.json").string(), "x\n");  // a new file: the umask's mode, as before
  CHECK((mode_of(dir / "fresh.json") & 0600) == 0600);
  CHECK(temporaries_in(dir) == 0);
  fs::remove_all(dir);
}

TEST_CASE("outputs: a FIFO nobody reads is an error at once, not a hang; /dev/stdout still works", "[files]") {
  const fs::path dir = fresh_folder("fifo");
  const fs::path fifo = dir / "run.json";
  REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  try {
    write_file(fifo.string(), "x\n");
    FAIL("wrote to a FIFO nobody reads");
  } catch (const std::system_error& e) {
    CHECK(e.code().value() == ENXIO);
  }
  CHECK(detail::append_whole_line(fifo.string(), "x\n") == ENXIO);
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  if (child == 0) {  // the child's stdout is the pipe: /dev/stdout -> /proc/self/fd/1 -> pipe:[...]
    ::dup2(fds[1], 1);
    ::close(fds[0]);
    try {
      write_file("/dev/stdout", "through stdout\n");
    } catch (...) {
      std::_Exit(1);
    }
    std::_Exit(0);
  }
  ::close(fds[1]);
  char buf[64] = {};
  const ssize_t n = ::read(fds[0], buf, sizeof buf - 1);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(WEXITSTATUS(status) == 0);
  CHECK(std::string(buf, n > 0 ? static_cast<std::size_t>(n) : 0) == "through stdout\n");
  fs::remove_all(dir);
}
