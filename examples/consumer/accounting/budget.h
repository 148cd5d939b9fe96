// A privacy budget of the consumer's own: the header shares its directory name with
// dpkit's accounting/ package, and both are included in one file (table1_row2.cc).
#ifndef CONSUMER_ACCOUNTING_BUDGET_H_
#define CONSUMER_ACCOUNTING_BUDGET_H_

namespace consumer {

struct Budget {
  double epsilon;
  double delta;
};

// True when a certified (epsilon_upper, delta) guarantee fits inside the budget.
inline bool Fits(const Budget& budget, double epsilon_upper, double delta) {
  return epsilon_upper <= budget.epsilon && delta <= budget.delta;
}

}  // namespace consumer

#endif  // CONSUMER_ACCOUNTING_BUDGET_H_
