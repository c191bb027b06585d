#include "tune/sweep_plot.h"

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <vector>

extern char** environ;

namespace airt::tune::internal {
namespace {

// The program's stdout and stderr, read whole; its exit status in `exit_code` (-1 when it
// could not start or did not exit normally).
Result<std::string> Capture(std::vector<std::string> argv, int* exit_code) {
  int out[2];
  if (pipe2(out, O_CLOEXEC) != 0) return Internal(std::string("pipe: ") + std::strerror(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, out[1], STDERR_FILENO);
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  pid_t pid = 0;
  int spawned = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  close(out[1]);
  if (spawned != 0) {
    close(out[0]);
    return Unavailable("cannot run " + argv[0] + ": " + std::strerror(spawned));
  }
  std::string text;
  char buffer[4096];
  for (ssize_t n; (n = read(out[0], buffer, sizeof buffer)) != 0;) {
    if (n < 0) {
      if (errno == EINTR) continue;
      break;
    }
    text.append(buffer, static_cast<size_t>(n));
  }
  close(out[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  *exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return text;
}

std::string LastLine(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r')) text.pop_back();
  size_t cut = text.rfind('\n');
  return cut == std::string::npos ? text : text.substr(cut + 1);
}

}  // namespace

Result<std::string> PlotExperiment(const std::string& experiment_path, const std::string& metric) {
  const char* env = std::getenv("AIRT_PYTHON");
  std::string python = env != nullptr && *env != '\0' ? env : "python3";
  int code = -1;
  AIRT_ASSIGN_OR_RETURN(std::string said, Capture({python, "-m", "airt.tune.progress",
                                                   experiment_path, metric},
                                                  &code));
  std::string last = LastLine(said);
  if (code != 0 || last.empty()) {
    return Unavailable(python + " -m airt.tune.progress did not draw it (exit " +
                       std::to_string(code) + "): " + (last.empty() ? "no output" : last) +
                       " (set AIRT_PYTHON to a Python with airt and matplotlib)");
  }
  return last;
}

}  // namespace airt::tune::internal
