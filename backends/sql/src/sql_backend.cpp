#include "baton/backends/sql/sql_backend.hpp"

#include "config.hpp"
#include "dialect.hpp"
#include "sql_store.hpp"

namespace baton::backends::sql {

std::shared_ptr<mutex_backend> make_backend(const sql_options& options, runtime& rt) {
  detail::validate(options);
  auto store = std::make_shared<detail::sql_store>(options, rt);
  contend_options defaults;
  defaults.poll_interval = options.poll_interval;
  return std::make_shared<lease_store_backend>(std::string(to_string(options.kind)), rt,
                                               std::move(store), defaults);
}

std::shared_ptr<mutex_backend> make_backend(const backend_config& config, runtime& rt) {
  return make_backend(parse_options(config), rt);
}

std::string schema_sql(dialect d, std::string_view table) {
  return detail::with_table(detail::schema_file(d), table);
}

}  // namespace baton::backends::sql
