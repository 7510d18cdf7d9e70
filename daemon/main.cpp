// baton: the cluster-wide cron daemon (daemon/). See `baton --help` and cli.cpp for the command
// line.
#include <iostream>
#include <string>
#include <vector>

#include "cli.hpp"
#include "commands.hpp"

int main(int argc, char** argv) {
  using namespace baton::daemon;
  command_line cl;
  try {
    cl = parse_command_line(std::vector<std::string>(argv + 1, argv + argc));
  } catch (const usage_error& e) {
    std::cerr << "baton: " << e.what() << "\nRun 'baton --help' for usage.\n";
    return exit_usage;
  }
  if (cl.help) {
    std::cout << (cl.command.empty() ? usage() : command_help(cl.command));
    return exit_ok;
  }
  if (cl.version) {
    std::cout << "baton " << version() << "\n";
    return exit_ok;
  }
  try {
    if (cl.command == "run") return run(cl);
    if (cl.command == "validate") return validate(cl);
    if (cl.command == "status") return status(cl);
    if (cl.command == "history") return history(cl);
    if (cl.command == "pause" || cl.command == "resume" || cl.command == "trigger")
      return control(cl);
    if (cl.command == "drain") return drain(cl);
    return calendar(cl);
  } catch (const std::exception& e) {
    std::cerr << "baton " << cl.command << ": " << e.what() << "\n";
    return exit_failure;
  }
}
