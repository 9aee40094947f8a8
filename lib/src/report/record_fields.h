#pragma once
// The records a run writes (run.json, metrics.jsonl) declare their fields once,
// in a visit(v, record) that calls v.field(key, member[, scalar]) per field, as
// the config schema declares its keys. JSON writing and reading walk the same
// declaration (JsonOut, JsonIn below), and so does TensorBoard (tensorboard.cpp),
// through the scalar a field names.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

#include "gputrain/parallel/split.h"
#include "gputrain/train/observer.h"
#include "gputrain/train/trainer.h"

namespace gputrain::report::detail {

inline constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

// The record kinds of metrics.jsonl, as a mask of the ones a scalar is logged for.
enum RecordKinds : unsigned { kOnInterval = 1, kOnEpoch = 2, kOnTest = 4, kOnTraining = 3, kOnEvery = 7 };

// A field's TensorBoard scalar: "name" under its record's section (train_step/,
// train/, test/), or as written when it holds a '/'; `scale` converts the
// unit (bytes to GiB), `when` the runs it means something in.
struct Scalar {
  enum class When { kAlways, kLabeled, kFp16 };
  const char* name;
  unsigned kinds = kOnEvery;
  When when = When::kAlways;
  double scale = 1;
};

// The nested records' fields.
template <class R, class T>
using If = std::enable_if_t<std::is_same_v<std::remove_const_t<R>, T>, int>;

template <class V, class R, If<R, train::Spread> = 0>
void visit(V& v, R& s) {
  v.field("min", s.min);
  v.field("mean", s.mean);
  v.field("max", s.max);
}

template <class V, class R, If<R, train::RankTiming> = 0>
void visit(V& v, R& t) {
  v.field("count", t.ranks);
  v.field("slowest", t.slowest);
  v.field("step_s", t.step_s);
  v.field("data_wait_s", t.data_wait_s);
  v.field("collective_wait_s", t.collective_wait_s);
}

template <class V, class R, If<R, parallel::ReplicaSplit> = 0>
void visit(V& v, R& s) {
  v.field("replica", s.replica);
  v.field("device", s.device);
  v.field("begin", s.begin);
  v.field("end", s.end);
}

template <class V, class R, If<R, train::TargetReached> = 0>
void visit(V& v, R& t) {
  v.field("accuracy", t.accuracy);
  v.field("epoch", t.epoch);
  v.field("step", t.step);
  v.field("time_to_target_s", t.train_s);
  v.field("time_to_target_wall_s", t.wall_s);
}

class JsonOut;

// A record type: one with a visit() (found through the visitor, whose namespace
// this is, or through the type's own).
template <class T, class = void>
struct HasFields : std::false_type {};
template <class T>
struct HasFields<T, std::void_t<decltype(visit(std::declval<JsonOut&>(), std::declval<T&>()))>> : std::true_type {};

template <class T>
struct IsOptional : std::false_type {};
template <class T>
struct IsOptional<std::optional<T>> : std::true_type {};
template <class T>
struct IsVector : std::false_type {};
template <class T>
struct IsVector<std::vector<T>> : std::true_type {};

// Records read whole or not at all: one missing part makes the whole unset
// (an interval's rank timing). Others keep the defaults of what they lack.
template <class T>
inline constexpr bool kWholeOrNothing = std::is_same_v<T, train::RankTiming> || std::is_same_v<T, train::Spread>;

template <class T>
nlohmann::ordered_json json_value(const T& value);

// Writes each field it is shown into one JSON object, in declaration order.
// An unset optional and an empty list are left out (metrics.jsonl's lines stay
// short), or, `every_key`, written as null and [] (run.json names every key).
class JsonOut {
 public:
  explicit JsonOut(bool every_key = false) : every_key_(every_key) {}
  template <class T, class... Scalar>
  void field(const char* key, const T& value, const Scalar&...) {
    if constexpr (IsOptional<T>::value) {
      if (value) {
        json_[key] = json_value(*value);
      } else if (every_key_) {
        json_[key] = nullptr;
      }
    } else if constexpr (IsVector<T>::value) {
      if (!value.empty() || every_key_) json_[key] = json_value(value);
    } else {
      json_[key] = json_value(value);
    }
  }
  nlohmann::ordered_json& json() { return json_; }

 private:
  nlohmann::ordered_json json_ = nlohmann::ordered_json::object();
  bool every_key_;
};

template <class T>
nlohmann::ordered_json json_value(const T& value) {
  if constexpr (IsOptional<T>::value) {
    return value ? json_value(*value) : nlohmann::ordered_json(nullptr);
  } else if constexpr (IsVector<T>::value) {
    nlohmann::ordered_json array = nlohmann::ordered_json::array();
    for (const auto& item : value) array.push_back(json_value(item));
    return array;
  } else if constexpr (HasFields<T>::value) {
    JsonOut out;
    visit(out, value);
    return out.json();
  } else if constexpr (std::is_enum_v<T>) {
    return choices(value).word(value);  // the ChoiceTable declared beside each enum
  } else {
    return value;
  }
}

template <class T>
bool read_json_value(const nlohmann::json& j, T& out);

// Reads each field it is shown from one JSON object. A missing field keeps its
// default; one of the wrong type is unset (an optional), kept at its default,
// or, `strict`, an std::invalid_argument naming the key.
class JsonIn {
 public:
  explicit JsonIn(const nlohmann::json& json, bool strict = false) : json_(json), strict_(strict) {}
  template <class T, class... Scalar>
  void field(const char* key, T& value, const Scalar&...) {
    const auto it = json_.find(key);
    if (it == json_.end()) {
      if (!IsOptional<T>::value) whole_ = false;
      return;
    }
    if (read_json_value(*it, value) || IsOptional<T>::value) return;
    whole_ = false;
    if (strict_) throw std::invalid_argument(std::string(key) + " is " + it->dump());
  }
  // Every field that is not optional was there and read.
  bool whole() const { return whole_; }

 private:
  const nlohmann::json& json_;
  bool strict_;
  bool whole_ = true;
};

template <class T>
bool read_json_value(const nlohmann::json& j, T& out) {
  if constexpr (IsOptional<T>::value) {
    typename T::value_type value{};
    if (j.is_null() || !read_json_value(j, value)) {
      out.reset();
      return j.is_null();
    }
    out = std::move(value);
    return true;
  } else if constexpr (IsVector<T>::value) {
    if (!j.is_array()) return false;
    out.clear();
    for (const auto& item : j) {
      typename T::value_type value{};
      if (read_json_value(item, value)) out.push_back(std::move(value));
    }
    return true;
  } else if constexpr (HasFields<T>::value) {
    if (!j.is_object()) return false;
    JsonIn in(j);
    visit(in, out);
    return in.whole() || !kWholeOrNothing<T>;
  } else if constexpr (std::is_enum_v<T>) {
    if (!j.is_string()) return false;
    // A word a newer gputrain wrote keeps the default.
    if (const auto value = choices(out).parse(j.get<std::string>())) out = *value;
    return true;
  } else if constexpr (std::is_same_v<T, std::string>) {
    if (!j.is_string()) return false;
    out = j.get<std::string>();
    return true;
  } else if constexpr (std::is_same_v<T, int64_t>) {
    if (!j.is_number()) return false;
    out = j.is_number_integer() ? j.get<int64_t>() : static_cast<int64_t>(j.get<double>());
    return true;
  } else {
    static_assert(std::is_same_v<T, double>, "a field type JSON records do not hold");
    if (!j.is_number()) return false;
    out = j.get<double>();
    return true;
  }
}

}  // namespace gputrain::report::detail
