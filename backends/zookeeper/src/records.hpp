#pragma once
// History and controls of the ZooKeeper backend (records.hpp's record_store), beside the lock
// folders: <base>/<name>@history/<fence>-<seq> and <base>/<name>@controls.
#include <memory>
#include <string>

#include "baton/mutex/records.hpp"
#include "session.hpp"

namespace baton::backends::zookeeper::detail {

/// The folder of a mutex's history entries; '@' never occurs in a mutex name, so it cannot be
/// another mutex's folder.
std::string history_dir(const settings& s, const std::string& name);
/// The node whose data is a mutex's controls record.
std::string controls_node(const settings& s, const std::string& name);

/// A started record store over `s` (it subscribes to session events to re-arm its watches).
std::shared_ptr<record_store> make_records(std::shared_ptr<session> s);

}  // namespace baton::backends::zookeeper::detail
