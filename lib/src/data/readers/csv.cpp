// dataset: csv — a table of numbers: data.root/train.csv and test.csv, each
// with a header row; data.target_column names the target (default: the last
// column) and every other column is a numeric feature. Integer targets are
// classes; other text targets are class labels, numbered in sorted order over
// both files; numbers with a fraction make it a regression.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "gputrain/common/error.h"
#include "gputrain/common/strings.h"
#include "readers/readers.h"

namespace gputrain::data::detail {
namespace {

namespace fs = std::filesystem;

constexpr const char* kName = "csv";

struct CsvTable {
  std::string file;
  std::vector<std::string> header;
  std::vector<std::vector<std::string>> rows;
  std::vector<int64_t> lines;         // the file line each row starts on (the header is line 1)
  bool dropped_empty_column = false;  // every line ended in a comma (drop_trailing_empty_column)
};

// RFC 4180: commas separate fields; a field in double quotes may hold commas,
// line breaks and doubled quotes. CRLF line ends and blank lines are accepted.
CsvTable parse_csv(const std::string& file, const std::string& text) {
  CsvTable table{file, {}, {}, {}, false};
  std::vector<std::string> record;
  std::string field;
  bool quoted = false;
  bool was_quoted = false;
  int64_t line = 1;
  int64_t record_line = 1;
  const auto end_record = [&] {
    record.push_back(field);
    field.clear();
    was_quoted = false;
    const bool blank = record.size() == 1 && record[0].empty();
    if (!blank) {
      if (table.header.empty()) {
        table.header = record;
      } else {
        if (record.size() != table.header.size()) {
          throw DataError(
              fmt::format("{}: {}:{}: {} fields, but the header has {}; every row needs one value per "
                          "column",
                          kName, file, record_line, record.size(), table.header.size()));
        }
        table.rows.push_back(record);
        table.lines.push_back(record_line);
      }
    }
    record.clear();
  };
  for (std::size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted) {
      if (c == '"' && i + 1 < text.size() && text[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        if (c == '\n') ++line;
        field += c;
      }
    } else if (c == '"' && field.empty() && !was_quoted) {
      quoted = was_quoted = true;
    } else if (c == ',') {
      record.push_back(field);
      field.clear();
      was_quoted = false;
    } else if (c == '\n' || c == '\r') {
      if (c == '\r' && i + 1 < text.size() && text[i + 1] == '\n') ++i;
      end_record();
      record_line = ++line;
    } else {
      field += c;
    }
  }
  if (quoted) {
    throw DataError(
        fmt::format("{}: {}:{}: a quoted field is never closed (a \" is missing)", kName, file, record_line));
  }
  if (!field.empty() || !record.empty()) end_record();
  return table;
}

// A comma at the end of every line (some exporters write one) makes an unnamed
// column of empty cells; as the last column it would be taken for the target,
// and the real target would become a feature. It holds nothing: it is dropped.
void drop_trailing_empty_column(CsvTable& table) {
  const auto empty = [](const std::string& cell) { return trim(cell).empty(); };
  if (table.header.size() < 2 || !empty(table.header.back())) return;
  for (const auto& row : table.rows)
    if (!empty(row.back())) return;
  table.header.pop_back();
  for (auto& row : table.rows) row.pop_back();
  table.dropped_empty_column = true;
}

// A cell as error messages echo it: a long one (a whole file in one quoted field) cut short.
std::string shown(const std::string& cell) {
  constexpr std::size_t kShown = 40;
  if (cell.size() <= kShown) return cell;
  return fmt::format("{}... ({} characters)", cell.substr(0, kShown), cell.size());
}

// The header's names, each once: a feature named twice is a mistake in the table, and data.target_column
// would take whichever came first. Another separator than the comma makes the header one name.
void require_header(const CsvTable& table) {
  const std::vector<std::string>& header = table.header;
  if (header.size() == 1) {
    for (const char separator : {';', '\t', '|'}) {
      if (header[0].find(separator) == std::string::npos) continue;
      const std::string written = separator == '\t' ? "\\t" : std::string(1, separator);
      throw DataError(
          fmt::format("{0}: {1}:1: the header is one column, '{2}', holding '{3}': the file separates its columns with "
                      "'{3}', and gputrain reads comma-separated values. Save it with commas (pandas: "
                      "df.to_csv(path, index=False))",
                      kName, table.file, shown(header[0]), written));
    }
  }
  std::map<std::string, std::size_t> first_column;
  for (std::size_t column = 0; column < header.size(); ++column) {
    const auto [named, fresh] = first_column.emplace(std::string(trim(header[column])), column);
    if (fresh) continue;
    throw DataError(fmt::format("{}: {}:1: columns {} and {} are both named '{}'; give each column its own name", kName,
                                table.file, named->second + 1, column + 1, shown(header[column])));
  }
}

std::optional<CsvTable> read_table(const fs::path& file) {
  if (!is_data_file(kName, file)) return std::nullopt;
  std::ifstream in(file, std::ios::binary);
  if (!in) throw DataError(fmt::format("{}: {}: cannot be opened for reading", kName, file.string()));
  std::ostringstream read;
  read << in.rdbuf();
  std::string text = read.str();
  // Excel's "CSV UTF-8" starts with a byte order mark, which would otherwise be part of the first name.
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) text.erase(0, 3);
  CsvTable table = parse_csv(file.string(), text);
  if (table.header.empty())
    throw DataError(fmt::format("{}: {}: is empty; it needs a header row", kName, file.string()));
  require_header(table);
  if (table.rows.empty()) throw DataError(fmt::format("{}: {}: has a header but no rows", kName, file.string()));
  drop_trailing_empty_column(table);
  return table;
}

std::optional<double> number(const std::string& cell) {
  const std::string text(trim(cell));
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const double value = std::strtod(text.c_str(), &end);
  if (end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(value)) return std::nullopt;
  // strtod reads hexadecimal ("0x10" as 16); a table's numbers are decimal.
  if (text.find_first_of("xX") != std::string::npos) return std::nullopt;
  return value;
}

bool is_integer(const std::string& cell) {
  const auto value = number(cell);
  return value && std::floor(*value) == *value && std::string(trim(cell)).find_first_of(".eE") == std::string::npos;
}

std::size_t target_index(const CsvTable& table, const std::string& target_column) {
  if (target_column.empty()) {
    if (trim(table.header.back()).empty()) {
      throw DataError(
          fmt::format("{}: {}:1: the last column, the target by default, has no name; name it in the header or set "
                      "data.target_column to the target's column",
                      kName, table.file));
    }
    return table.header.size() - 1;
  }
  for (std::size_t column = 0; column < table.header.size(); ++column) {
    if (trim(table.header[column]) == target_column) return column;
  }
  std::string problem = fmt::format("{}: {}: has no column '{}' (data.target_column); its columns: {}", kName,
                                    table.file, target_column, fmt::join(table.header, ", "));
  if (const std::string near = closest_match(target_column, table.header); !near.empty()) {
    problem += fmt::format(" (did you mean '{}'?)", near);
  }
  throw DataError(problem);
}

// The features as float32 [N, F]; the first column that holds text is refused
// at its first such cell, with every other such column named.
torch::Tensor features(const CsvTable& table, std::size_t target) {
  const int64_t samples = static_cast<int64_t>(table.rows.size());
  // `target` past the last column: the table has no target column.
  const int64_t width = static_cast<int64_t>(table.header.size()) - (target < table.header.size() ? 1 : 0);
  if (width < 1)
    throw DataError(fmt::format("{}: {}: has only the target column; it needs features", kName, table.file));
  torch::Tensor out = torch::empty({samples, width}, torch::kFloat32);
  float* values = out.data_ptr<float>();
  std::vector<std::string> text_columns;
  std::string first_problem;
  for (std::size_t column = 0, feature = 0; column < table.header.size(); ++column) {
    if (column == target) continue;
    for (int64_t row = 0; row < samples; ++row) {
      const std::string& cell = table.rows[static_cast<std::size_t>(row)][column];
      const auto value = number(cell);
      if (!value) {
        if (first_problem.empty()) {
          first_problem =
              fmt::format("{}:{}:{}: column '{}' holds '{}', which is not a number", table.file,
                          table.lines[static_cast<std::size_t>(row)], column + 1, table.header[column], shown(cell));
        }
        text_columns.push_back("'" + table.header[column] + "'");
        break;
      }
      values[row * width + static_cast<int64_t>(feature)] = static_cast<float>(*value);
    }
    ++feature;
  }
  if (!first_problem.empty()) {
    throw DataError(fmt::format("{}: {}. Features must be numbers: drop {} {} or encode {} as numbers", kName,
                                first_problem, text_columns.size() == 1 ? "column" : "columns",
                                fmt::join(text_columns, ", "), text_columns.size() == 1 ? "it" : "them"));
  }
  return out;
}

// How the target column reads, from the cells of both files: every cell an
// integer (classes), every cell a number (regression), else labels.
enum class TargetText { kIntegers, kNumbers, kLabels };

// How pandas and spreadsheets write a missing number. Among numbers, such a cell is a gap in the data, not a class.
bool is_missing_marker(const std::string& cell) {
  std::string text(trim(cell));
  std::transform(text.begin(), text.end(), text.begin(), [](unsigned char c) { return std::tolower(c); });
  for (const char* marker : {"nan", "-nan", "na", "n/a", "nil", "null", "none", "?", "-", "#n/a"}) {
    if (text == marker) return true;
  }
  return false;
}

[[noreturn]] void missing_target(const CsvTable& table, std::size_t row, std::size_t target, const std::string& what) {
  throw DataError(
      fmt::format("{}: {}:{}:{}: the target '{}' is {}. Every row needs its target: fill it in or delete the row (a "
                  "missing target would otherwise train as a class of its own)",
                  kName, table.file, table.lines[row], target + 1, table.header[target], what));
}

TargetText target_text(const std::vector<const CsvTable*>& tables, const std::vector<std::size_t>& targets) {
  bool integers = true;
  bool labels = false;
  bool numbers = false;
  std::optional<std::pair<std::size_t, std::size_t>> first_marker;  // table, row
  for (std::size_t t = 0; t < tables.size(); ++t) {
    for (std::size_t row = 0; row < tables[t]->rows.size(); ++row) {
      const std::string& cell = tables[t]->rows[row][targets[t]];
      if (trim(cell).empty()) missing_target(*tables[t], row, targets[t], "empty");
      if (!number(cell)) {
        labels = labels || !is_missing_marker(cell);
        if (!first_marker && is_missing_marker(cell)) first_marker = {t, row};
        continue;
      }
      numbers = true;
      integers = integers && is_integer(cell);
    }
  }
  if (first_marker && numbers && !labels) {
    const auto [t, row] = *first_marker;
    missing_target(*tables[t], row, targets[t],
                   fmt::format("'{}', a missing value among numbers", trim(tables[t]->rows[row][targets[t]])));
  }
  if (labels || first_marker) return TargetText::kLabels;
  return integers ? TargetText::kIntegers : TargetText::kNumbers;
}

}  // namespace

std::shared_ptr<const Dataset> read_csv(const std::string& root, const std::string& target_column, Split split) {
  require_directory(kName, root, "data.root is the directory that holds train.csv and test.csv");
  const bool train = split == Split::kTrain;
  const fs::path file = fs::path(root) / (train ? "train.csv" : "test.csv");
  const std::optional<CsvTable> table = read_table(file);
  if (!table) {
    throw DataError(
        fmt::format("{}: {} does not exist; data.root must hold train.csv and test.csv, each with a "
                    "header row",
                    kName, file.string()));
  }
  const std::optional<CsvTable> other = read_table(fs::path(root) / (train ? "test.csv" : "train.csv"));
  const std::size_t target = target_index(*table, target_column);
  std::vector<const CsvTable*> tables{&*table};
  std::vector<std::size_t> targets{target};
  if (other) {
    // The features line up by position: the two files must have the same columns.
    if (other->header != table->header) {
      throw DataError(
          fmt::format("{}: {} has the columns {} but {} has {}; both need the same columns in the same "
                      "order",
                      kName, table->file, fmt::join(table->header, ", "), other->file, fmt::join(other->header, ", ")));
    }
    tables.push_back(&*other);
    targets.push_back(target);
  }
  if (train) {
    for (const CsvTable* read : tables) {
      if (read->dropped_empty_column) {
        spdlog::warn("{}: {}: every line ends in a comma; the empty, unnamed column this makes is left out", kName,
                     read->file);
      }
    }
  }
  const int64_t samples = static_cast<int64_t>(table->rows.size());

  DatasetInfo info;
  info.name = kName;
  info.source = root;
  info.samples = samples;
  torch::Tensor inputs = features(*table, target);
  info.input_shape = {inputs.size(1)};
  info.columns = table->header;
  torch::Tensor labels;
  const std::string column = table->header[target];
  switch (target_text(tables, targets)) {
    case TargetText::kIntegers: {
      labels = torch::empty({samples}, torch::kInt64);
      int64_t highest = 0;
      for (std::size_t t = 0; t < tables.size(); ++t) {
        for (std::size_t row = 0; row < tables[t]->rows.size(); ++row) {
          const auto value = static_cast<int64_t>(*number(tables[t]->rows[row][targets[t]]));
          if (value < 0 || value >= kMaxClasses) {
            throw DataError(
                fmt::format("{}: {}:{}:{}: class label {} in column '{}'; integer labels are classes "
                            "0, 1, ... (at most {} classes; a regression's values need a fraction, e.g. 5.0)",
                            kName, tables[t]->file, tables[t]->lines[row], targets[t] + 1, value, column, kMaxClasses));
          }
          highest = std::max(highest, value);
          if (t == 0) labels[static_cast<int64_t>(row)] = value;
        }
      }
      info.target_kind = TargetKind::kClasses;
      info.classes = highest + 1;
      break;
    }
    case TargetText::kNumbers: {
      labels = torch::empty({samples, 1}, torch::kFloat32);
      bool whole = true;
      for (int64_t row = 0; row < samples; ++row) {
        const double value = *number(table->rows[static_cast<std::size_t>(row)][target]);
        labels[row][0] = value;
        whole = whole && std::floor(value) == value;
      }
      if (train && whole) {
        spdlog::warn(
            "{}: column '{}' holds whole numbers written as reals ('{}' at {}:{}): a regression target (one real "
            "value per row, mean squared error), not classes. For classes write them as integers (1, not 1.0)",
            kName, column, shown(std::string(trim(table->rows[0][target]))), table->file, table->lines[0]);
      }
      info.target_kind = TargetKind::kValues;
      info.targets = 1;
      break;
    }
    case TargetText::kLabels: {
      std::set<std::string> names;
      for (std::size_t t = 0; t < tables.size(); ++t) {
        for (const auto& row : tables[t]->rows) names.insert(std::string(trim(row[targets[t]])));
      }
      info.class_names.assign(names.begin(), names.end());
      std::map<std::string, int64_t> index;
      for (const auto& name : info.class_names) index.emplace(name, static_cast<int64_t>(index.size()));
      labels = torch::empty({samples}, torch::kInt64);
      for (int64_t row = 0; row < samples; ++row) {
        labels[row] = index.at(std::string(trim(table->rows[static_cast<std::size_t>(row)][target])));
      }
      info.target_kind = TargetKind::kClasses;
      info.classes = static_cast<int64_t>(info.class_names.size());
      if (train) {
        std::vector<std::string> numbered;
        for (const auto& [name, i] : index) numbered.push_back(fmt::format("{} {}", i, name));
        spdlog::info("csv: column '{}' holds {} class labels: {}", column, info.classes, fmt::join(numbered, ", "));
      }
      break;
    }
  }
  return std::make_shared<TensorDataset>(std::move(info), inputs, labels,
                                         std::vector<TensorDataset::Part>{{file.string(), samples}});
}

torch::Tensor read_csv_features(const std::string& file, const std::vector<std::string>& train_columns,
                                const std::string& target_column) {
  const std::optional<CsvTable> table = read_table(file);
  if (!table) throw DataError(fmt::format("{}: {} does not exist", kName, file));
  const std::size_t target = target_index(CsvTable{"the training table", train_columns, {}, {}, false}, target_column);
  if (table->header == train_columns) return features(*table, target);
  std::vector<std::string> columns = train_columns;
  columns.erase(columns.begin() + static_cast<std::ptrdiff_t>(target));
  if (table->header != columns) {
    throw DataError(
        fmt::format("{}: {} has the columns {}, but the model was trained on {} and the target '{}'; give the same "
                    "columns, the target's may be left out",
                    kName, file, fmt::join(table->header, ", "), fmt::join(columns, ", "), train_columns[target]));
  }
  // No target column: every column is a feature.
  return features(*table, table->header.size());
}

}  // namespace gputrain::data::detail
