#pragma once
// The subcommands of `baton`; each returns the process exit status.
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "baton/config/config.hpp"
#include "baton/mutex/runtime.hpp"
#include "cli.hpp"

namespace baton::daemon {

/// baton run: contend and fire until SIGTERM/SIGINT.
int run(const command_line& cl);
/// baton validate: check the config, print the schedules and their next fire times.
int validate(const command_line& cl);
/// baton status: the owner record and last fire of every schedule, from the backend.
int status(const command_line& cl);
/// baton calendar: the next fire times of a cron expression.
int calendar(const command_line& cl);
/// baton history NAME: the recorded runs of a schedule, newest first.
int history(const command_line& cl);
/// baton pause / resume / trigger NAME: change a schedule's cluster-wide controls.
int control(const command_line& cl);
/// baton drain [--node ID] [--undo]: set a node's drain request in its membership record and
/// wait until it leads nothing.
int drain(const command_line& cl);

/// Loads --config; on error prints every message to stderr and returns nullopt.
std::optional<config::daemon_config> load_or_report(const command_line& cl);

/// The program a command runs, as exec would find it (PATH for a bare name); empty if none.
std::string find_program(const std::string& program);

/// Builds the configured backend. A parameter it rejects is printed as "FILE: /backend: ..."
/// (status exit_usage); any other failure goes to `report` (status exit_failure). Null on failure.
/// `read_only`: for inspection (backend_config::read_only): it creates and changes nothing.
std::shared_ptr<mutex_backend> make_configured_backend(
    const config::daemon_config& config, runtime& rt, int& status,
    const std::function<void(const std::string&)>& report, bool read_only = false);

/// Backend parameters for display, every secret masked by the backend's descriptor
/// (baton::describe).
std::string describe_backend(const backend_config& backend);

/// `text` (an error from the backend) with every secret of `backend` replaced by ***.
std::string scrub_secrets(const backend_config& backend, const std::string& text);

}  // namespace baton::daemon
