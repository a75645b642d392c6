"""From scores to pass/fail: criteria (the threshold, comparisons with a baseline, effective
length), suite gates and the statistics behind them."""
