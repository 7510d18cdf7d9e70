#pragma once
// The ZooKeeper contend service: one ephemeral sequential node per contender, the lowest owns
// the mutex, every other one watches only its predecessor.
#include <memory>
#include <string>

#include "baton/mutex/contend_service.hpp"
#include "session.hpp"

namespace baton::backends::zookeeper::detail {

/// Makes a stopped contend service for mutex `name` on `session`.
std::shared_ptr<contend_service> make_contend_service(std::shared_ptr<session> session,
                                                      std::string name, std::string contender_id,
                                                      std::shared_ptr<mutex_contender> contender,
                                                      contend_options options);

}  // namespace baton::backends::zookeeper::detail
