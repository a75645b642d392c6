"""RULER: the recall suite's synthetic tasks (needles, multi-key/value/query, variable
tracking, common and frequent words, JSON key-value) and the haystacks they hide in."""
