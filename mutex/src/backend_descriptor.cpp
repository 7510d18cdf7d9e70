#include "baton/mutex/backend_descriptor.hpp"

#include <algorithm>
#include <cctype>

namespace baton {
namespace {

// Levenshtein distance, for "did you mean".
std::size_t distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string quoted(std::string_view s) { return "\"" + std::string(s) + "\""; }

bool word_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

}  // namespace

std::string_view nearest_name(std::string_view key,
                              const std::vector<std::string_view>& candidates) {
  std::string_view best;
  std::size_t best_distance = 3;
  for (auto candidate : candidates)
    if (const auto d = distance(key, candidate); d < best_distance)
      best_distance = d, best = candidate;
  return best;
}

std::string_view to_string(param_kind kind) noexcept {
  switch (kind) {
    case param_kind::text:
      return "text";
    case param_kind::duration:
      return "duration";
    case param_kind::boolean:
      return "boolean";
    case param_kind::count:
      return "count";
  }
  return "?";
}

const param_descriptor* backend_descriptor::find(std::string_view name) const noexcept {
  for (const auto& p : params)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<setting_problem> check_param_names(const backend_descriptor& d,
                                               const std::vector<std::string>& names) {
  std::vector<setting_problem> problems;
  std::string known;
  for (const auto& p : d.params) known += (known.empty() ? "" : ", ") + p.name;
  for (const auto& name : names) {
    if (d.find(name) != nullptr) continue;
    std::string message = "unknown key " + quoted(name);
    std::vector<std::string_view> names_known;
    for (const auto& p : d.params) names_known.push_back(p.name);
    if (const auto best = nearest_name(name, names_known); !best.empty())
      message += " (did you mean " + quoted(best) + "?)";
    message += known.empty() ? "; a " + d.type + " backend takes no parameters"
                             : "; a " + d.type + " backend takes: " + known;
    problems.push_back({name, message});
  }
  return problems;
}

void check_params(const backend_descriptor& d, const backend_config& config) {
  std::vector<std::string> names;
  for (const auto& [name, value] : config.params) names.push_back(name);
  for (const auto& p : check_param_names(d, names))
    throw backend_param_error(p.field,
                              d.type + " backend: parameter '" + p.field + "': " + p.message);
  for (const auto& p : d.params)
    if (p.required && config.params.count(p.name) == 0)
      throw backend_param_error(
          p.name, d.type + " backend: parameter '" + p.name + "' is missing (required): " + p.doc);
}

masked_value mask_param(const backend_descriptor* d, const std::string& name,
                        const std::string& value) {
  const param_descriptor* p = d != nullptr ? d->find(name) : nullptr;
  if (p == nullptr || p->secret) return {"***", {value}};
  if (p->mask) return p->mask(value);
  return {value, {}};
}

std::string describe(const backend_descriptor* d, const backend_config& config) {
  std::string out = config.type;
  for (const auto& [name, value] : config.params)
    out += " " + name + "=" + mask_param(d, name, value).text;
  return out;
}

std::vector<std::string> secrets_of(const backend_descriptor* d, const backend_config& config) {
  std::vector<std::string> out;
  for (const auto& [name, value] : config.params)
    for (auto& s : mask_param(d, name, value).secrets)
      if (!s.empty() && std::find(out.begin(), out.end(), s) == out.end())
        out.push_back(std::move(s));
  // Longest first: a secret that contains another is replaced whole.
  std::sort(out.begin(), out.end(),
            [](const std::string& a, const std::string& b) { return a.size() > b.size(); });
  return out;
}

std::string scrub(std::string text, const std::vector<std::string>& secrets) {
  static const std::string mask = "***";
  for (const auto& secret : secrets) {
    if (secret.empty()) continue;
    for (std::size_t at = text.find(secret); at != std::string::npos; at = text.find(secret, at)) {
      const std::size_t end = at + secret.size();
      // Inside a longer word only where the secret's own edge is a word character.
      const bool joined_before = at > 0 && word_char(secret.front()) && word_char(text[at - 1]);
      const bool joined_after =
          end < text.size() && word_char(secret.back()) && word_char(text[end]);
      if (joined_before || joined_after) {
        ++at;
        continue;
      }
      text.replace(at, secret.size(), mask);
      at += mask.size();
    }
  }
  return text;
}

}  // namespace baton
