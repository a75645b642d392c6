"""The model-based judge (HELMET's GPT-4o judging, 100-LongBench's judged QA and summaries): a
second model, reached like the model under test, that rates outputs by a rubric.

``rubrics`` says what is asked and how ratings combine into a score, ``replies`` reads a judge's
reply, ``keypoints`` gives summaries their key points, ``panel`` asks the judges through the
store, ``agreement`` compares two judges (or a judge and a rule metric), ``judge_plugin`` wires the
options.
"""
