// enum_names: one table per enum gives its text names, to_string, parse and the list of valid
// names for errors and --help, so the three never drift apart.
//
//   inline constexpr enum_name<swap_lock_mode> swap_lock_mode_names[] = {
//       {swap_lock_mode::global, "global"}, {swap_lock_mode::cluster, "cluster"}, ...};
//   name_of(swap_lock_mode_names, m)                        -> "cluster"
//   parse_enum(swap_lock_mode_names, "percpu", "swap lock mode")
//   parse_enum_list(swap_lock_mode_names, "global,percpu", "swap lock mode")   ("all" = every one)
//
// Thread-safety: tables are constexpr constants; the functions are pure.
// Invariants: a table lists each enumerator once and each name once (checked by enum_names_test
// for every table in the tree through valid_table).
#pragma once

#include <cerrno>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "uswap/base/status.h"

namespace uswap {

template <class E>
struct enum_name {
  E value;
  std::string_view name;
};

// The name of `v`, or "?" for a value the table does not list.
template <class E>
constexpr std::string_view name_of(std::span<const enum_name<E>> table, E v) noexcept {
  for (const auto& e : table)
    if (e.value == v) return e.name;
  return "?";
}
template <class E, size_t N>
constexpr std::string_view name_of(const enum_name<E> (&table)[N], E v) noexcept {
  return name_of(std::span<const enum_name<E>>(table), v);
}

// "a, b, c": the valid names, in table order.
template <class E>
std::string valid_names(std::span<const enum_name<E>> table) {
  std::string out;
  for (const auto& e : table) {
    if (!out.empty()) out += ", ";
    out += e.name;
  }
  return out;
}
template <class E, size_t N>
std::string valid_names(const enum_name<E> (&table)[N]) {
  return valid_names(std::span<const enum_name<E>>(table));
}

// Every value, in table order.
template <class E, size_t N>
std::vector<E> all_values(const enum_name<E> (&table)[N]) {
  std::vector<E> out;
  for (const auto& e : table) out.push_back(e.value);
  return out;
}

// The value named `text`; EINVAL naming `what` and the valid names otherwise.
template <class E>
result<E> parse_enum(std::span<const enum_name<E>> table, std::string_view text,
                     std::string_view what) {
  for (const auto& e : table)
    if (e.name == text) return e.value;
  return error(EINVAL, "unknown " + std::string(what) + " '" + std::string(text) +
                           "' (valid: " + valid_names(table) + ")");
}
template <class E, size_t N>
result<E> parse_enum(const enum_name<E> (&table)[N], std::string_view text, std::string_view what) {
  return parse_enum(std::span<const enum_name<E>>(table), text, what);
}

// "all" (every value, in table order) or a comma-separated list of names, in the order given.
// EINVAL for an empty list, an empty item, an unknown name or a name given twice.
template <class E>
result<std::vector<E>> parse_enum_list(std::span<const enum_name<E>> table, std::string_view text,
                                       std::string_view what) {
  std::vector<E> out;
  if (text == "all") {
    for (const auto& e : table) out.push_back(e.value);
    return out;
  }
  size_t at = 0;
  while (true) {
    const size_t comma = text.find(',', at);
    const std::string_view item = text.substr(at, comma == std::string_view::npos ? text.npos : comma - at);
    if (item.empty())
      return error(EINVAL, "empty " + std::string(what) + " in list '" + std::string(text) +
                               "' (valid: " + valid_names(table) + ", or all)");
    auto v = parse_enum(table, item, what);
    if (!v) return v.error();
    for (E seen : out)
      if (seen == *v)
        return error(EINVAL, std::string(what) + " '" + std::string(item) + "' given twice in '" +
                                 std::string(text) + "'");
    out.push_back(*v);
    if (comma == std::string_view::npos) break;
    at = comma + 1;
  }
  return out;
}
template <class E, size_t N>
result<std::vector<E>> parse_enum_list(const enum_name<E> (&table)[N], std::string_view text,
                                       std::string_view what) {
  return parse_enum_list(std::span<const enum_name<E>>(table), text, what);
}

// Whether every value and every name appears once (for tests of each table).
template <class E, size_t N>
constexpr bool valid_table(const enum_name<E> (&table)[N]) noexcept {
  for (size_t i = 0; i < N; ++i)
    for (size_t j = i + 1; j < N; ++j)
      if (table[i].value == table[j].value || table[i].name == table[j].name) return false;
  return N > 0;
}

}  // namespace uswap
