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

Context build_context(const Memory& m, const ContextQuery& q, const ContextRules& rules, const TokenCounter& count,
                      const LabelRules& labels, const RankRules& ranks) {
  Context ctx;
  if (rules.mode == "none") return ctx;
  if (!is_context_mode(rules.mode))
    throw LeapError("memory: context mode '" + rules.mode + "' is not " + kContextModes);
  std::map<std::string, size_t> tier_tokens;
  const std::map<std::string, size_t> tier_cap = {
      {"hot", rules.hot_tokens}, {"warm", rules.warm_tokens}, {"cold", rules.cold_tokens}};
  auto offer = [&](const std::string& tier, int64_t id, std::string text) {
    size_t t = count(text);
    if (ctx.tokens + t > rules.budget_tokens) return false;
    auto cap = tier_cap.find(tier);
    if (cap != tier_cap.end() && cap->second && tier_tokens[tier] + t > cap->second) return false;
    ctx.tokens += t;
    tier_tokens[tier] += t;
    ctx.items.push_back({tier, id, std::move(text), t});
    return true;
  };
  auto ranked = m.ranked(q.task, labels, ranks);
  // Same backend and GPU first, then the same backend elsewhere, then other hardware.
  auto place = [&](const Case& c) { return c.backend != q.backend ? 2 : (c.gpu == q.gpu ? 0 : 1); };
  std::stable_sort(ranked.begin(), ranked.end(),
                   [&](const RankedCase& x, const RankedCase& y) { return place(x.c) < place(y.c); });

  if (rules.mode == "passive") {
    std::vector<RankedCase> history = ranked;
    std::sort(history.begin(), history.end(), [](const RankedCase& x, const RankedCase& y) { return x.c.id > y.c.id; });
    for (const auto& r : history)
      if (!offer("passive", r.c.id, full_case(r, "attempt", rules.max_source_chars))) break;
    return ctx;
  }

  std::set<int64_t> used;
  std::set<std::string> hot_sources;  // a source is shown in full once
  // The graph off (KOPE's ablation): what an agent without memory has, its previous attempt and
  // that attempt's verdict.
  if (rules.mode == "previous") {
    for (const auto& r : ranked)
      if (r.c.id == q.previous) offer("hot", r.c.id, full_case(r, "previous attempt", rules.max_source_chars));
    return ctx;
  }
  // Hot: the incumbent (the fastest correct case of this task on this hardware), the previous
  // attempt, then the best-ranked ok cases of this task, in full.
  const RankedCase* incumbent = nullptr;
  const RankedCase* previous = nullptr;
  for (const auto& r : ranked) {
    if (r.c.id == q.previous) previous = &r;
    if (r.c.status == Status::ok && place(r.c) == 0 && (!incumbent || r.c.speedup > incumbent->c.speedup)) incumbent = &r;
  }
  // The previous attempt resubmitting the incumbent's source is the incumbent (one kernel, shown once).
  if (incumbent && previous && previous->c.status == Status::ok && previous->c.source_hash == incumbent->c.source_hash)
    incumbent = previous;
  if (incumbent && offer("hot", incumbent->c.id,
                         full_case(*incumbent, std::string("incumbent, the fastest correct so far") +
                                                   (incumbent->c.id == q.previous ? ", and the previous attempt" : ""),
                                   rules.max_source_chars))) {
    used.insert(incumbent->c.id);
    hot_sources.insert(incumbent->c.source_hash);
    ctx.incumbent = incumbent->c.id;
  }
  if (previous && !used.count(previous->c.id) &&
      offer("hot", previous->c.id, full_case(*previous, "previous attempt", rules.max_source_chars))) {
    used.insert(previous->c.id);
    hot_sources.insert(previous->c.source_hash);
  }
  int hot = 0;
  for (const auto& r : ranked) {
    if (hot >= rules.hot_cases) break;
    if (r.c.status != Status::ok || used.count(r.c.id) || hot_sources.count(r.c.source_hash)) continue;
    if (offer("hot", r.c.id, full_case(r, "best attempt " + std::to_string(hot + 1), rules.max_source_chars))) {
      used.insert(r.c.id);
      hot_sources.insert(r.c.source_hash);
      ++hot;
    }
  }
  // Warm: summaries of the next-ranked cases of this task, then of related tasks; after a failed
  // attempt, first this task's cases that fixed the same verdict (its status and check).
  const std::string failed_as = previous && previous->c.status != Status::ok ? status_text(previous->c) : "";
  std::map<int64_t, const Case*> by_id;  // this task's cases
  for (const auto& r : ranked) by_id[r.c.id] = &r.c;
  int warm = 0;
  if (!failed_as.empty()) {
    for (const auto& r : ranked) {
      if (warm >= rules.warm_cases) break;
      const Case* fixed = failure_fixed(r.c, by_id);
      if (used.count(r.c.id) || !fixed || status_text(*fixed) != failed_as) continue;
      if (offer("warm", r.c.id, summary(r, false) + " (fixed " + failed_as + ")")) {
        used.insert(r.c.id);
        ++warm;
      }
    }
  }
  // After a correct attempt the profiler labelled, first the cases that made a kernel with the
  // same bottleneck faster (what got past it before): this task's, then the family's, then any
  // task's on this backend.
  // (A stored case has a label only when it was correct and profiled: Memory::add.)
  const std::string bound_as = previous ? previous->c.bottleneck : "";
  const std::string family = q.family.empty() ? q.task.substr(0, q.task.find('_')) : q.family;
  auto related = [&](const std::string& t) { return !family.empty() && t.compare(0, family.size(), family) == 0; };
  if (!bound_as.empty()) {
    auto offer_sped_up = [&](const std::vector<RankedCase>& cases, bool other_task) {
      std::map<int64_t, const Case*> at;
      for (const auto& r : cases) at[r.c.id] = &r.c;
      for (const auto& r : cases) {
        if (warm >= rules.warm_cases) return;
        auto p = at.find(r.c.predecessor);
        if (used.count(r.c.id) || r.c.status != Status::ok || r.c.backend != q.backend || p == at.end() ||
            p->second->bottleneck != bound_as || r.c.speedup <= p->second->speedup)
          continue;
        if (offer("warm", r.c.id, summary(r, other_task) + " (sped up a " + bound_as + " kernel, case " +
                                      std::to_string(p->second->id) + ")")) {
          used.insert(r.c.id);
          ++warm;
        }
      }
    };
    offer_sped_up(ranked, false);
    std::vector<std::string> others = m.tasks();
    others.erase(std::remove(others.begin(), others.end(), q.task), others.end());
    std::stable_partition(others.begin(), others.end(), related);
    for (const auto& t : others) {
      if (warm >= rules.warm_cases) break;
      offer_sped_up(m.ranked(t, labels, ranks), true);
    }
  }
  for (const auto& r : ranked) {
    if (warm >= rules.warm_cases) break;
    if (used.count(r.c.id)) continue;
    if (offer("warm", r.c.id, summary(r, false))) {
      used.insert(r.c.id);
      ++warm;
    }
  }
  if (warm < rules.warm_cases && !family.empty()) {
    std::vector<RankedCase> others;
    for (const auto& t : m.tasks()) {
      if (t == q.task || !related(t)) continue;
      auto rt = m.ranked(t, labels, ranks);
      for (const auto& r : rt)
        if (r.c.status == Status::ok) {
          others.push_back(r);
          break;  // each related task's best
        }
    }
    std::stable_sort(others.begin(), others.end(), [&](const RankedCase& x, const RankedCase& y) {
      return place(x.c) != place(y.c) ? place(x.c) < place(y.c) : x.rank > y.rank;
    });
    for (const auto& r : others) {
      if (warm >= rules.warm_cases) break;
      if (offer("warm", r.c.id, summary(r, true))) ++warm;
    }
  }
  // Cold: failure patterns of this task (status, check, feedback's first line) with their count,
  // and the fix when a failure's successor passed.
  struct Lesson {
    int count = 0;
    int64_t first = 0, fixed_by = 0;
    double fixed_speedup = 0;
  };
  std::map<std::string, Lesson> lessons;
  std::vector<std::string> order;
  for (const auto& [id, c] : by_id) {  // oldest first: ids grow with time
    if (c->status == Status::ok) {
      if (const Case* fixed = failure_fixed(*c, by_id)) {
        auto& l = lessons[pattern_of(*fixed)];
        if (!l.fixed_by) {
          l.fixed_by = id;
          l.fixed_speedup = c->speedup;
        }
      }
      continue;
    }
    const std::string key = pattern_of(*c);
    auto& l = lessons[key];
    if (l.count++ == 0) {
      l.first = id;
      order.push_back(key);
    }
  }
  // Chosen by the current failure: when the previous attempt failed, the lessons of the same
  // verdict (status and check) come first, fixed ones first among them, then how other tasks
  // fixed that verdict (the family's first, then any task's on this backend).
  auto matches = [&](const std::string& key) {
    return !failed_as.empty() && key.compare(0, failed_as.size() + 1, failed_as + ":") == 0;
  };
  std::stable_sort(order.begin(), order.end(), [&](const std::string& x, const std::string& y) {
    const int kx = matches(x) ? (lessons[x].fixed_by ? 0 : 1) : 2, ky = matches(y) ? (lessons[y].fixed_by ? 0 : 1) : 2;
    return kx < ky;
  });
  int cold = 0;
  auto lesson_text = [](const std::string& key, const Lesson& l, const std::string& task) {
    return "- " + (task.empty() ? "" : "[" + task + "] ") + key + " (" + std::to_string(l.count) + "x" +
           (l.fixed_by ? "; fixed in case " + std::to_string(l.fixed_by) + ", speedup " + fmt_speedup(l.fixed_speedup) : "") +
           ")";
  };
  size_t next = 0;
  for (; next < order.size() && matches(order[next]); ++next) {
    if (cold >= rules.cold_lessons) break;
    if (offer("cold", lessons[order[next]].first, lesson_text(order[next], lessons[order[next]], ""))) ++cold;
  }
  if (!failed_as.empty() && cold < rules.cold_lessons) {
    std::vector<std::string> others = m.tasks();
    others.erase(std::remove(others.begin(), others.end(), q.task), others.end());
    std::stable_partition(others.begin(), others.end(), related);
    for (const auto& t : others) {
      if (cold >= rules.cold_lessons) break;
      auto tc = m.cases(t);
      std::map<int64_t, const Case*> at;
      for (const auto& c : tc) at[c.id] = &c;
      for (const auto& c : tc) {  // the first fix of this verdict in the task
        const Case* fixed = failure_fixed(c, at);
        if (!fixed || c.backend != q.backend || status_text(*fixed) != failed_as) continue;
        Lesson l;
        l.count = 1;
        l.first = fixed->id;
        l.fixed_by = c.id;
        l.fixed_speedup = c.speedup;
        if (offer("cold", l.first, lesson_text(pattern_of(*fixed), l, t))) ++cold;
        break;
      }
    }
  }
  // The target's documentation notes (KOPE's cold documentation), then this task's other lessons.
  for (const auto& note : q.notes) offer("cold", 0, "- " + note);
  for (; next < order.size(); ++next) {
    if (cold >= rules.cold_lessons) break;
    if (offer("cold", lessons[order[next]].first, lesson_text(order[next], lessons[order[next]], ""))) ++cold;
  }
  return ctx;
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
