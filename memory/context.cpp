// The next attempt's context from the experience graph: hot, warm and cold tiers under a token
// budget (active), the task's history (passive), the previous attempt alone (previous: the graph
// off) or nothing (none).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include "common/error.h"
#include "common/paths.h"
#include "memory/memory.h"
#include "memory/text.h"

namespace leap::memory {

namespace fs = std::filesystem;

using detail::first_line;
using detail::fmt_speedup;
using detail::pattern_of;

size_t approximate_tokens(const std::string& text) { return (text.size() + 3) / 4; }

std::string Context::text() const {
  static const std::map<std::string, std::string> heading = {
      {"hot", "## Best attempts so far and the previous attempt"},
      {"warm", "## Other attempts (summaries)"},
      {"cold", "## Lessons from failures, notes on the target"},
      {"passive", "## Earlier attempts, newest first"}};
  std::string out, tier;
  for (const auto& it : items) {
    if (it.tier != tier) {
      tier = it.tier;
      out += (out.empty() ? "" : "\n") + heading.at(tier) + "\n";
    }
    out += it.text + "\n";
  }
  return out;
}

namespace {

std::string full_case(const RankedCase& r, const std::string& what, size_t max_chars) {
  const Case& c = r.c;
  std::string src = c.source;
  if (src.size() > max_chars) src = src.substr(0, max_chars) + "\n/* ... cut at " + std::to_string(max_chars) + " characters */";
  std::string head = what + " (case " + std::to_string(c.id) + ", turn " + std::to_string(c.turn) + "): " +
                     status_text(c) + (c.status == Status::ok ? ", speedup " + fmt_speedup(c.speedup) : "") + ", " + r.label;
  if (!c.feedback.empty() && c.status != Status::ok) head += "\nfeedback: " + first_line(c.feedback, 400);
  // A correct kernel's feedback is its profile ([eval] profile): the counters behind its speed.
  if (!c.feedback.empty() && c.status == Status::ok)
    head += "\n" + (c.feedback.size() > 600 ? c.feedback.substr(0, 600) + " ..." : c.feedback);
  return head + "\n```\n" + src + "\n```";
}

std::string summary(const RankedCase& r, bool other_task) {
  const Case& c = r.c;
  std::string s = "- case " + std::to_string(c.id) + (other_task ? " [" + c.task + "]" : "") + ", turn " +
                  std::to_string(c.turn) + (c.predecessor ? " from case " + std::to_string(c.predecessor) : "") + ": " +
                  status_text(c);
  if (c.status == Status::ok) s += ", speedup " + fmt_speedup(c.speedup) + " (" + r.label + ")";
  else if (!c.feedback.empty()) s += ": " + first_line(c.feedback);
  if (!c.gpu.empty()) s += " on " + c.gpu;
  return s;
}

// The failed case `c` refined into a pass (nullptr: `c` fixed no failure), its predecessor found by id.
template <class Lookup>
const Case* failure_fixed(const Case& c, const Lookup& by_id) {
  if (c.status != Status::ok) return nullptr;
  auto p = by_id.find(c.predecessor);
  return p != by_id.end() && p->second->status != Status::ok ? p->second : nullptr;
}

}  // namespace

std::vector<int64_t> Context::cases_shown(int64_t except) const {
  std::vector<int64_t> ids;
  for (const auto& it : items)
    if (it.case_id && it.case_id != except) ids.push_back(it.case_id);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

namespace {

// One context being filled, tier by tier, within the budget and each tier's cap: what the steps of
// build_context share (the task's ranked cases, those shown, the previous attempt and its verdict).
class ContextFill {
 public:
  ContextFill(const Memory& m, const ContextQuery& q, const ContextRules& rules, const TokenCounter& count,
              const LabelRules& labels, const RankRules& ranks)
      : m_(m), q_(q), rules_(rules), count_(count), labels_(labels), ranks_(ranks),
        tier_cap_{{"hot", rules.hot_tokens}, {"warm", rules.warm_tokens}, {"cold", rules.cold_tokens}},
        ranked_(m.ranked(q.task, labels, ranks)),
        family_(q.family.empty() ? q.task.substr(0, q.task.find('_')) : q.family) {
    // Same backend and GPU first, then the same backend elsewhere, then other hardware.
    std::stable_sort(ranked_.begin(), ranked_.end(),
                     [&](const RankedCase& x, const RankedCase& y) { return place(x.c) < place(y.c); });
    for (const auto& r : ranked_) by_id_[r.c.id] = &r.c;
  }

  // The task's history, newest first, in full.
  void passive() {
    std::vector<RankedCase> history = ranked_;
    std::sort(history.begin(), history.end(), [](const RankedCase& x, const RankedCase& y) { return x.c.id > y.c.id; });
    for (const auto& r : history)
      if (!offer("passive", r.c.id, full_case(r, "attempt", rules_.max_source_chars))) break;
  }

  // The graph off (KOPE's ablation): what an agent without memory has, its previous attempt and
  // that attempt's verdict.
  void previous_only() {
    for (const auto& r : ranked_)
      if (r.c.id == q_.previous) offer("hot", r.c.id, full_case(r, "previous attempt", rules_.max_source_chars));
  }

  void active() {
    hot();
    warm_fixes();
    warm_sped_up();
    warm_ranked();
    warm_family();
    cold();
  }

  Context ctx;

 private:
  int place(const Case& c) const { return c.backend != q_.backend ? 2 : (c.gpu == q_.gpu ? 0 : 1); }
  bool related(const std::string& t) const { return !family_.empty() && t.compare(0, family_.size(), family_) == 0; }
  bool warm_full() const { return warm_ >= rules_.warm_cases; }
  bool cold_full() const { return cold_ >= rules_.cold_lessons; }

  bool offer(const std::string& tier, int64_t id, std::string text) {
    size_t t = count_(text);
    if (ctx.tokens + t > rules_.budget_tokens) return false;
    auto cap = tier_cap_.find(tier);
    if (cap != tier_cap_.end() && cap->second && tier_tokens_[tier] + t > cap->second) return false;
    ctx.tokens += t;
    tier_tokens_[tier] += t;
    ctx.items.push_back({tier, id, std::move(text), t});
    return true;
  }
  bool offer_hot(const RankedCase& r, const std::string& what) {
    if (!offer("hot", r.c.id, full_case(r, what, rules_.max_source_chars))) return false;
    used_.insert(r.c.id);
    hot_sources_.insert(r.c.source_hash);
    return true;
  }
  void offer_warm(const RankedCase& r, const std::string& text) {
    if (offer("warm", r.c.id, text)) used_.insert(r.c.id), ++warm_;
  }
  // The other tasks, the family's first.
  std::vector<std::string> other_tasks() const {
    std::vector<std::string> others = m_.tasks();
    others.erase(std::remove(others.begin(), others.end(), q_.task), others.end());
    std::stable_partition(others.begin(), others.end(), [&](const std::string& t) { return related(t); });
    return others;
  }

  // Hot: the incumbent (the fastest correct case of this task on this hardware), the previous
  // attempt, then the best-ranked ok cases of this task, in full.
  void hot() {
    const RankedCase* incumbent = nullptr;
    for (const auto& r : ranked_) {
      if (r.c.id == q_.previous) previous_ = &r;
      if (r.c.status == Status::ok && place(r.c) == 0 && (!incumbent || r.c.speedup > incumbent->c.speedup))
        incumbent = &r;
    }
    // The previous attempt resubmitting the incumbent's source is the incumbent (one kernel, shown once).
    if (incumbent && previous_ && previous_->c.status == Status::ok &&
        previous_->c.source_hash == incumbent->c.source_hash)
      incumbent = previous_;
    if (incumbent && offer_hot(*incumbent, std::string("incumbent, the fastest correct so far") +
                                               (incumbent->c.id == q_.previous ? ", and the previous attempt" : "")))
      ctx.incumbent = incumbent->c.id;
    if (previous_ && !used_.count(previous_->c.id)) offer_hot(*previous_, "previous attempt");
    int hot = 0;
    for (const auto& r : ranked_) {
      if (hot >= rules_.hot_cases) break;
      if (r.c.status != Status::ok || used_.count(r.c.id) || hot_sources_.count(r.c.source_hash)) continue;
      if (offer_hot(r, "best attempt " + std::to_string(hot + 1))) ++hot;
    }
    failed_as_ = previous_ && previous_->c.status != Status::ok ? status_text(previous_->c) : "";
  }

  // Warm: summaries of the next-ranked cases of this task, then of related tasks; after a failed
  // attempt, first this task's cases that fixed the same verdict (its status and check).
  void warm_fixes() {
    if (failed_as_.empty()) return;
    for (const auto& r : ranked_) {
      if (warm_full()) break;
      const Case* fixed = failure_fixed(r.c, by_id_);
      if (used_.count(r.c.id) || !fixed || status_text(*fixed) != failed_as_) continue;
      offer_warm(r, summary(r, false) + " (fixed " + failed_as_ + ")");
    }
  }

  // After a correct attempt the profiler labelled, first the cases that made a kernel with the
  // same bottleneck faster (what got past it before): this task's, then the family's, then any
  // task's on this backend.
  // (A stored case has a label only when it was correct and profiled: Memory::add.)
  void warm_sped_up() {
    const std::string bound_as = previous_ ? previous_->c.bottleneck : "";
    if (bound_as.empty()) return;
    auto offer_sped_up = [&](const std::vector<RankedCase>& cases, bool other_task) {
      std::map<int64_t, const Case*> at;
      for (const auto& r : cases) at[r.c.id] = &r.c;
      for (const auto& r : cases) {
        if (warm_full()) return;
        auto p = at.find(r.c.predecessor);
        if (used_.count(r.c.id) || r.c.status != Status::ok || r.c.backend != q_.backend || p == at.end() ||
            p->second->bottleneck != bound_as || r.c.speedup <= p->second->speedup)
          continue;
        offer_warm(r, summary(r, other_task) + " (sped up a " + bound_as + " kernel, case " +
                          std::to_string(p->second->id) + ")");
      }
    };
    offer_sped_up(ranked_, false);
    for (const auto& t : other_tasks()) {
      if (warm_full()) break;
      offer_sped_up(m_.ranked(t, labels_, ranks_), true);
    }
  }

  void warm_ranked() {
    for (const auto& r : ranked_) {
      if (warm_full()) break;
      if (!used_.count(r.c.id)) offer_warm(r, summary(r, false));
    }
  }

  // Each related task's best.
  void warm_family() {
    if (warm_full() || family_.empty()) return;
    std::vector<RankedCase> others;
    for (const auto& t : m_.tasks()) {
      if (t == q_.task || !related(t)) continue;
      auto rt = m_.ranked(t, labels_, ranks_);
      for (const auto& r : rt)
        if (r.c.status == Status::ok) {
          others.push_back(r);
          break;
        }
    }
    std::stable_sort(others.begin(), others.end(), [&](const RankedCase& x, const RankedCase& y) {
      return place(x.c) != place(y.c) ? place(x.c) < place(y.c) : x.rank > y.rank;
    });
    for (const auto& r : others) {
      if (warm_full()) break;
      if (offer("warm", r.c.id, summary(r, true))) ++warm_;
    }
  }

  // Cold: failure patterns of this task (status, check, feedback's first line) with their count,
  // and the fix when a failure's successor passed.
  struct Lesson {
    int count = 0;
    int64_t first = 0, fixed_by = 0;
    double fixed_speedup = 0;
  };
  static std::string lesson_text(const std::string& key, const Lesson& l, const std::string& task) {
    return "- " + (task.empty() ? "" : "[" + task + "] ") + key + " (" + std::to_string(l.count) + "x" +
           (l.fixed_by ? "; fixed in case " + std::to_string(l.fixed_by) + ", speedup " + fmt_speedup(l.fixed_speedup) : "") +
           ")";
  }
  bool offer_lesson(const std::string& key) {
    return offer("cold", lessons_[key].first, lesson_text(key, lessons_[key], ""));
  }
  // Whether a lesson is of the previous attempt's verdict.
  bool matches(const std::string& key) const {
    return !failed_as_.empty() && key.compare(0, failed_as_.size() + 1, failed_as_ + ":") == 0;
  }

  void cold() {
    const std::vector<std::string> order = lessons_in_order();
    size_t next = 0;
    for (; next < order.size() && matches(order[next]); ++next) {
      if (cold_full()) break;
      if (offer_lesson(order[next])) ++cold_;
    }
    cold_other_tasks();
    // The target's documentation notes (KOPE's cold documentation), then this task's other lessons.
    for (const auto& note : q_.notes) offer("cold", 0, "- " + note);
    for (; next < order.size(); ++next) {
      if (cold_full()) break;
      if (offer_lesson(order[next])) ++cold_;
    }
  }

  // This task's lessons, oldest first (ids grow with time), chosen by the current failure: when the
  // previous attempt failed, the lessons of the same verdict (status and check) come first, fixed
  // ones first among them.
  std::vector<std::string> lessons_in_order() {
    std::vector<std::string> order;
    for (const auto& [id, c] : by_id_) {
      if (c->status == Status::ok) {
        if (const Case* fixed = failure_fixed(*c, by_id_)) {
          auto& l = lessons_[pattern_of(*fixed)];
          if (!l.fixed_by) {
            l.fixed_by = id;
            l.fixed_speedup = c->speedup;
          }
        }
        continue;
      }
      const std::string key = pattern_of(*c);
      auto& l = lessons_[key];
      if (l.count++ == 0) {
        l.first = id;
        order.push_back(key);
      }
    }
    std::stable_sort(order.begin(), order.end(), [&](const std::string& x, const std::string& y) {
      const int kx = matches(x) ? (lessons_[x].fixed_by ? 0 : 1) : 2, ky = matches(y) ? (lessons_[y].fixed_by ? 0 : 1) : 2;
      return kx < ky;
    });
    return order;
  }

  // How other tasks fixed the previous attempt's verdict (the family's first, then any task's on
  // this backend): each task's first fix of it.
  void cold_other_tasks() {
    if (failed_as_.empty()) return;
    for (const auto& t : other_tasks()) {
      if (cold_full()) break;
      auto tc = m_.cases(t);
      std::map<int64_t, const Case*> at;
      for (const auto& c : tc) at[c.id] = &c;
      for (const auto& c : tc) {
        const Case* fixed = failure_fixed(c, at);
        if (!fixed || c.backend != q_.backend || status_text(*fixed) != failed_as_) continue;
        Lesson l;
        l.count = 1;
        l.first = fixed->id;
        l.fixed_by = c.id;
        l.fixed_speedup = c.speedup;
        if (offer("cold", l.first, lesson_text(pattern_of(*fixed), l, t))) ++cold_;
        break;
      }
    }
  }

  const Memory& m_;
  const ContextQuery& q_;
  const ContextRules& rules_;
  const TokenCounter& count_;
  const LabelRules& labels_;
  const RankRules& ranks_;
  const std::map<std::string, size_t> tier_cap_;
  std::map<std::string, size_t> tier_tokens_;
  std::vector<RankedCase> ranked_;
  std::map<int64_t, const Case*> by_id_;  // this task's cases
  const std::string family_;
  std::set<int64_t> used_;
  std::set<std::string> hot_sources_;  // a source is shown in full once
  const RankedCase* previous_ = nullptr;
  std::string failed_as_;  // the previous attempt's verdict, where it failed
  std::map<std::string, Lesson> lessons_;
  int warm_ = 0, cold_ = 0;
};

}  // namespace

Context build_context(const Memory& m, const ContextQuery& q, const ContextRules& rules, const TokenCounter& count,
                      const LabelRules& labels, const RankRules& ranks) {
  if (rules.mode == "none") return {};
  if (!is_context_mode(rules.mode))
    throw LeapError("memory: context mode '" + rules.mode + "' is not " + kContextModes);
  ContextFill fill(m, q, rules, count, labels, ranks);
  if (rules.mode == "passive") fill.passive();
  else if (rules.mode == "previous") fill.previous_only();
  else fill.active();
  return std::move(fill.ctx);
}

std::vector<std::string> target_notes(const std::string& backend, const std::string& gpu) {
  const fs::path dir = fs::path(data_dir()) / "prompt" / "notes";
  std::vector<fs::path> files = {dir / (backend + ".md")};
  std::error_code ec;
  std::vector<fs::path> specific;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    const std::string name = e.path().filename().string(), prefix = backend + "-";
    if (name.size() > prefix.size() + 3 && name.compare(0, prefix.size(), prefix) == 0 && e.path().extension() == ".md") {
      const std::string model = name.substr(prefix.size(), name.size() - prefix.size() - 3);
      if (detail::lower(gpu).find(detail::lower(model)) != std::string::npos) specific.push_back(e.path());
    }
  }
  std::sort(specific.begin(), specific.end());
  files.insert(files.end(), specific.begin(), specific.end());
  std::vector<std::string> notes;
  for (const auto& f : files) {
    std::ifstream in(f);
    for (std::string line; std::getline(in, line);)
      if (line.rfind("- ", 0) == 0) notes.push_back(line.substr(2));
  }
  return notes;
}

ContextSettings context_settings(const MemoryConfig& mc) {
  ContextSettings s;
  s.rules.mode = mc.context;
  s.rules.budget_tokens = static_cast<size_t>(mc.budget_tokens);
  s.rules.hot_cases = mc.hot_cases;
  s.rules.warm_cases = mc.warm_cases;
  s.rules.cold_lessons = mc.cold_lessons;
  s.rules.hot_tokens = static_cast<size_t>(mc.hot_tokens);
  s.rules.warm_tokens = static_cast<size_t>(mc.warm_tokens);
  s.rules.cold_tokens = static_cast<size_t>(mc.cold_tokens);
  s.notes = mc.notes;
  s.rules.max_source_chars = static_cast<size_t>(mc.max_source_chars);
  s.labels = {mc.improvement, mc.slight_regression};
  s.ranks.gamma = mc.rank_gamma;
  s.ranks.confidence_k = mc.confidence_k;
  return s;
}

}  // namespace leap::memory
