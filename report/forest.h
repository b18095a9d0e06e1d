// The experience graph of a memory database (memory/) as the report draws it: per task, the
// predecessor forest of its cases (KOPE's view: which attempt each one refined), each case
// coloured by its label.
#pragma once
#include <string>

namespace leap::report {

// Up to `max_tasks` tasks (most cases first), each a chart of at most `max_cases` cases (its
// oldest: the roots and what grew from them). Empty when the database has no case.
std::string forest_charts(const std::string& db_path, int max_tasks = 6, int max_cases = 80);

}  // namespace leap::report
