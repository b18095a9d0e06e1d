#include "memory/memory.h"

#include <sqlite3.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "common/clock.h"
#include "common/error.h"
#include "common/hash.h"

namespace leap::memory {

namespace {

class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &st_, nullptr) != SQLITE_OK)
      throw LeapError(std::string("memory: ") + sqlite3_errmsg(db) + " in: " + sql);
  }
  ~Statement() { sqlite3_finalize(st_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;
  Statement& bind(int i, const std::string& s) {
    sqlite3_bind_text(st_, i, s.data(), static_cast<int>(s.size()), SQLITE_TRANSIENT);
    return *this;
  }
  Statement& bind(int i, double v) {
    sqlite3_bind_double(st_, i, v);
    return *this;
  }
  Statement& bind(int i, int64_t v) {
    sqlite3_bind_int64(st_, i, v);
    return *this;
  }
  bool step() {
    int rc = sqlite3_step(st_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw LeapError(std::string("memory: ") + sqlite3_errmsg(db_));
  }
  std::string text(int i) const {
    auto* p = reinterpret_cast<const char*>(sqlite3_column_text(st_, i));
    return p ? std::string(p, static_cast<size_t>(sqlite3_column_bytes(st_, i))) : std::string();
  }
  double real(int i) const { return sqlite3_column_double(st_, i); }
  int64_t integer(int i) const { return sqlite3_column_int64(st_, i); }

 private:
  sqlite3* db_;
  sqlite3_stmt* st_ = nullptr;
};

void exec(sqlite3* db, const char* sql) {
  char* err = nullptr;
  if (sqlite3_exec(db, sql, nullptr, nullptr, &err) != SQLITE_OK) {
    std::string why = err ? err : "unknown error";
    sqlite3_free(err);
    throw LeapError("memory: " + why);
  }
}

constexpr const char* kCaseColumns =
    "c.id, c.task, c.backend, c.gpu, s.text, c.source_hash, c.status, c.check_name, c.feedback, c.speedup, "
    "c.candidate_us, c.turn, c.policy, c.time, c.predecessor, c.relation, c.decision, c.bottleneck";

Case read_case(const Statement& s) {
  Case c;
  c.id = s.integer(0);
  c.task = s.text(1);
  c.backend = s.text(2);
  c.gpu = s.text(3);
  c.source = s.text(4);
  c.source_hash = s.text(5);
  c.status = status_from(s.text(6)).value_or(Status::infra_error);  // written by this code: always known
  c.check = check_from(s.text(7)).value_or(Check::none);
  c.feedback = s.text(8);
  c.speedup = s.real(9);
  c.candidate_us = s.real(10);
  c.turn = static_cast<int>(s.integer(11));
  c.policy = s.text(12);
  c.time = s.real(13);
  c.predecessor = s.integer(14);
  c.relation = s.text(15);
  c.decision = s.text(16);
  c.bottleneck = s.text(17);
  return c;
}

// The predecessor a step ratio is taken over: an ok one with a speedup (else none).
const Case* step_base(const Case* pred) { return pred && pred->status == Status::ok && pred->speedup > 0 ? pred : nullptr; }

}  // namespace

std::string status_text(const Case& c) {
  return c.check == Check::none ? to_string(c.status) : to_string(c.status) + " (" + to_string(c.check) + ")";
}

Case case_of(const EvalOutcome& o, const std::string& source, const std::string& gpu) {
  Case c;
  c.task = o.task;
  c.backend = to_string(o.backend);
  c.gpu = gpu;
  c.source = source;
  c.status = o.status;
  c.check = o.check;
  c.feedback = o.feedback;
  c.speedup = o.status == Status::ok ? o.speedup : 0;
  c.candidate_us = o.candidate_timing.median_us;
  c.bottleneck = o.status == Status::ok ? o.bottleneck : "";
  c.time = unix_seconds();
  return c;
}

std::string label_of(const Case& c, const Case* pred, const LabelRules& rules) {
  if (c.status != Status::ok)
    return c.check == Check::none ? to_string(c.status) : to_string(c.status) + ":" + to_string(c.check);
  const Case* base = step_base(pred);
  if (!base) return "first_pass";
  double r = c.speedup / base->speedup;
  if (r >= rules.improvement) return "improvement";
  if (r >= 1) return "marginal";
  if (r >= rules.slight_regression) return "slight_regression";
  return "regression";
}

Memory::Memory(const std::string& path, bool create) : path_(path) {
  if (!create && !std::filesystem::exists(path)) throw LeapError("memory: no database at " + path);
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_FULLMUTEX, nullptr) !=
      SQLITE_OK) {
    std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw LeapError("memory: cannot open " + path + ": " + why);
  }
  try {
    sqlite3_busy_timeout(db_, 5000);  // readers beside the one writer
    {
      Statement check(db_, "PRAGMA quick_check");
      std::string verdict = check.step() ? check.text(0) : "no answer";
      if (verdict != "ok") throw LeapError("memory: " + path + " fails SQLite's integrity check: " + verdict);
    }
    exec(db_, "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON;");
    exec(db_,
         "CREATE TABLE IF NOT EXISTS sources(hash TEXT PRIMARY KEY, text TEXT NOT NULL);"
         "CREATE TABLE IF NOT EXISTS cases(id INTEGER PRIMARY KEY AUTOINCREMENT, task TEXT NOT NULL, backend TEXT NOT NULL,"
         " gpu TEXT NOT NULL, source_hash TEXT NOT NULL REFERENCES sources(hash), status TEXT NOT NULL,"
         " check_name TEXT NOT NULL, feedback TEXT NOT NULL, speedup REAL NOT NULL, candidate_us REAL NOT NULL,"
         " turn INTEGER NOT NULL, policy TEXT NOT NULL, time REAL NOT NULL,"
         " predecessor INTEGER NOT NULL DEFAULT 0, relation TEXT NOT NULL);"
         "CREATE INDEX IF NOT EXISTS cases_task ON cases(task);"
         "CREATE INDEX IF NOT EXISTS cases_predecessor ON cases(predecessor);"
         "CREATE TABLE IF NOT EXISTS retrieved(case_id INTEGER NOT NULL REFERENCES cases(id),"
         " from_case INTEGER NOT NULL REFERENCES cases(id), PRIMARY KEY(case_id, from_case));");
    // Databases from before decisions and profiles were kept gain the columns (empty for their cases).
    std::set<std::string> columns;
    {
      Statement cols(db_, "PRAGMA table_info(cases)");
      while (cols.step()) columns.insert(cols.text(1));
    }
    for (const char* added : {"decision", "bottleneck"})
      if (!columns.count(added))
        exec(db_, (std::string("ALTER TABLE cases ADD COLUMN ") + added + " TEXT NOT NULL DEFAULT ''").c_str());
  } catch (const LeapError& e) {
    sqlite3_close(db_);
    throw LeapError(std::string(e.what()) + " (opening " + path + ")");
  }
}

Memory::~Memory() { sqlite3_close(db_); }

int64_t Memory::add(Case c) {
  if (c.task.empty()) throw LeapError("memory: a case needs its task");
  if (c.predecessor != 0 && !get(c.predecessor))
    throw LeapError("memory: predecessor case " + std::to_string(c.predecessor) + " does not exist");
  for (int64_t r : c.retrieved)
    if (!get(r)) throw LeapError("memory: retrieved case " + std::to_string(r) + " does not exist");
  c.source_hash = content_hash({c.source});
  exec(db_, "BEGIN IMMEDIATE");
  try {
    Statement(db_, "INSERT OR IGNORE INTO sources(hash, text) VALUES(?, ?)").bind(1, c.source_hash).bind(2, c.source).step();
    Statement ins(db_,
                  "INSERT INTO cases(task, backend, gpu, source_hash, status, check_name, feedback, speedup, candidate_us,"
                  " turn, policy, time, predecessor, relation, decision, bottleneck) VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)");
    ins.bind(1, c.task).bind(2, c.backend).bind(3, c.gpu).bind(4, c.source_hash).bind(5, to_string(c.status)).bind(6, to_string(c.check));
    ins.bind(7, c.feedback).bind(8, c.speedup).bind(9, c.candidate_us).bind(10, static_cast<int64_t>(c.turn));
    ins.bind(11, c.policy).bind(12, c.time).bind(13, c.predecessor).bind(14, c.relation).bind(15, c.decision);
    ins.bind(16, c.status == Status::ok ? c.bottleneck : std::string());
    ins.step();
    int64_t id = sqlite3_last_insert_rowid(db_);
    for (int64_t r : c.retrieved)
      Statement(db_, "INSERT OR IGNORE INTO retrieved(case_id, from_case) VALUES(?, ?)").bind(1, id).bind(2, r).step();
    exec(db_, "COMMIT");
    return id;
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

std::optional<Case> Memory::get(int64_t id) const {
  Statement s(db_, (std::string("SELECT ") + kCaseColumns +
                    " FROM cases c JOIN sources s ON s.hash = c.source_hash WHERE c.id = ?")
                       .c_str());
  s.bind(1, id);
  if (!s.step()) return std::nullopt;
  Case c = read_case(s);
  Statement r(db_, "SELECT from_case FROM retrieved WHERE case_id = ? ORDER BY from_case");
  r.bind(1, id);
  while (r.step()) c.retrieved.push_back(r.integer(0));
  return c;
}

std::vector<Case> Memory::cases(const std::string& task) const {
  std::string sql = std::string("SELECT ") + kCaseColumns + " FROM cases c JOIN sources s ON s.hash = c.source_hash" +
                    (task.empty() ? "" : " WHERE c.task = ?") + " ORDER BY c.id";
  Statement s(db_, sql.c_str());
  if (!task.empty()) s.bind(1, task);
  std::vector<Case> out;
  std::map<int64_t, size_t> at;
  while (s.step()) {
    out.push_back(read_case(s));
    at[out.back().id] = out.size() - 1;
  }
  Statement r(db_, "SELECT case_id, from_case FROM retrieved ORDER BY case_id, from_case");
  while (r.step())
    if (auto it = at.find(r.integer(0)); it != at.end()) out[it->second].retrieved.push_back(r.integer(1));
  return out;
}

std::vector<std::string> Memory::tasks() const {
  Statement s(db_, "SELECT DISTINCT task FROM cases ORDER BY task");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  return out;
}

std::vector<RankedCase> Memory::ranked(const std::string& task, const LabelRules& labels, const RankRules& rules) const {
  auto all = cases(task);
  std::map<int64_t, size_t> at;
  for (size_t i = 0; i < all.size(); ++i) at[all[i].id] = i;
  std::map<int64_t, std::vector<int64_t>> successors;
  std::map<std::string, int> evaluations;  // per source, of this task
  for (const auto& c : all) {
    if (c.predecessor) successors[c.predecessor].push_back(c.id);
    ++evaluations[c.source_hash];
  }
  std::vector<RankedCase> out(all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    const Case& c = all[i];
    const Case* pred = c.predecessor && at.count(c.predecessor) ? &all[at[c.predecessor]] : nullptr;
    out[i].c = c;
    out[i].label = label_of(c, pred, labels);
    // One scale for every case: its speed over the task's reference (a refinement's step over its
    // parent is its label, not its value), so a fast refinement of a fast parent ranks as fast.
    if (c.status == Status::ok) out[i].ratio = c.speedup;
    out[i].evaluations = evaluations[c.source_hash];
    out[i].confidence = out[i].evaluations / (out[i].evaluations + rules.confidence_k);
  }
  // Successors have larger ids (a predecessor exists before its case): newest first.
  for (size_t i = all.size(); i-- > 0;) {
    double sum = 0;
    for (int64_t s : successors[all[i].id]) sum += out[at[s]].value;
    out[i].value = rules.a * out[i].ratio + rules.b * rules.gamma * sum;
    out[i].rank = out[i].value * out[i].confidence;
  }
  std::stable_sort(out.begin(), out.end(), [](const RankedCase& x, const RankedCase& y) { return x.rank > y.rank; });
  return out;
}

Stats Memory::stats(const LabelRules& labels) const {
  Stats st;
  auto all = cases();
  std::map<int64_t, const Case*> by_id;
  std::set<std::string> tasks, sources;
  for (const auto& c : all) by_id[c.id] = &c;
  for (const auto& c : all) {
    ++st.cases;
    tasks.insert(c.task);
    sources.insert(c.source_hash);
    st.roots += c.predecessor == 0;
    ++st.by_status[to_string(c.status)];
    auto p = by_id.find(c.predecessor);
    ++st.by_label[label_of(c, p == by_id.end() ? nullptr : p->second, labels)];
  }
  st.tasks = static_cast<int64_t>(tasks.size());
  st.sources = static_cast<int64_t>(sources.size());
  return st;
}

}  // namespace leap::memory
