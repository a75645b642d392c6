"""The model-based judge (HELMET's GPT-4o judging, 100-LongBench's judged QA and summaries): a
second model, reached like the model under test, that rates outputs by a rubric.

``rubrics`` knows the rubrics by name (each benchmark family writes its own, beside its tasks:
what is asked and how ratings combine into a score) and the rating fields they share,
``prompts`` words them, ``replies`` reads a judge's reply, ``keypoints`` gives summaries their key
points, ``panel`` asks the judges through the store, ``agreement`` compares two judges (or a
judge and a rule metric), ``judge_plugin`` wires the options.
"""
