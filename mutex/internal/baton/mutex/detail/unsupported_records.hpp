#pragma once
// A record_store that answers every request with errc::backend_error: the records of a
// lease_store_backend built over a lease_store that keeps none.
#include <memory>

#include "baton/mutex/errc.hpp"
#include "baton/mutex/records.hpp"

namespace baton::detail {

class unsupported_records final : public record_store {
 public:
  void async_append_history(const std::string&, const std::string&, std::uint64_t, std::string,
                            std::size_t, append_handler handler) override {
    handler(make_error_code(errc::backend_error));
  }
  void async_read_history(const std::string&, std::size_t, history_handler handler) override {
    handler(make_error_code(errc::backend_error), {});
  }
  void async_read_controls(const std::string&, controls_handler handler) override {
    handler(make_error_code(errc::backend_error), {});
  }
  void async_write_controls(const std::string&, std::uint64_t, std::string,
                            controls_handler handler) override {
    handler(make_error_code(errc::backend_error), {});
  }
};

}  // namespace baton::detail
