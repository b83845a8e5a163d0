# Real datasets (SPEC §4 "Real data", docs/data.md): fetch -> preprocess -> pool instance.
#
# Include from a top-level Snakefile at the repo root, after loading the config:
#     configfile: "config/datasets.yaml"
#     include: "workflow/rules/data.smk"
# Final outputs: data/processed/{dataset}/instance.npz and report.json,
# dataset in DATA_DATASETS. No target rule here, so the including Snakefile's
# first rule stays the default target. Paths are relative to the working directory (repo root).

include: "data_common.smk"


# Downloads need the network (or only the local mirror): never send them to a cluster node.
localrules: download_mnist, download_heart_disease, download_coupon


rule download_mnist:
    output:
        archives=DATA_MNIST_ARCHIVES,
        extracted=DATA_MNIST_EXTRACTED,
    params:
        # archives sit at <root>/MNIST/raw/<name>
        root=lambda wildcards, output: str(Path(output.archives[0]).parents[2]),
        files=data_files("mnist"),
        mirror=data_mirror(),
    log:
        "logs/data/download_mnist.log",
    benchmark:
        "benchmarks/data/download_mnist.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=30,
    conda:
        "../envs/mnist.yaml"
    script:
        "../../scripts/fetch_mnist.py"


rule download_heart_disease:
    output:
        data_raw_paths("heart_disease"),
    params:
        files=data_files("heart_disease"),
        mirror=data_mirror(),
    log:
        "logs/data/download_heart_disease.log",
    benchmark:
        "benchmarks/data/download_heart_disease.tsv"
    threads: 1
    resources:
        mem_mb=500,
        runtime=10,
    conda:
        "../envs/data.yaml"
    script:
        "../../scripts/fetch_dataset.py"


rule download_coupon:
    output:
        data_raw_paths("coupon"),
    params:
        files=data_files("coupon"),
        mirror=data_mirror(),
    log:
        "logs/data/download_coupon.log",
    benchmark:
        "benchmarks/data/download_coupon.tsv"
    threads: 1
    resources:
        mem_mb=500,
        runtime=10,
    conda:
        "../envs/data.yaml"
    script:
        "../../scripts/fetch_dataset.py"


rule preprocess_mnist:
    input:
        DATA_MNIST_ARCHIVES,
        DATA_MNIST_EXTRACTED,
    output:
        features=f"{DATA_PROCESSED}/mnist/features.npz",
    params:
        dataset="mnist",
        options=data_options("mnist"),
        mnist_root=lambda wildcards, input: str(Path(input[0]).parents[2]),
    log:
        "logs/data/preprocess_mnist.log",
    benchmark:
        "benchmarks/data/preprocess_mnist.tsv"
    threads: 1
    resources:
        mem_mb=3000,
        runtime=20,
    conda:
        "../envs/mnist.yaml"
    script:
        "../../scripts/preprocess_dataset.py"


rule preprocess_heart_disease:
    input:
        data_raw_paths("heart_disease"),
    output:
        features=f"{DATA_PROCESSED}/heart_disease/features.npz",
    params:
        dataset="heart_disease",
        options=data_options("heart_disease"),
    log:
        "logs/data/preprocess_heart_disease.log",
    benchmark:
        "benchmarks/data/preprocess_heart_disease.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/data.yaml"
    script:
        "../../scripts/preprocess_dataset.py"


rule preprocess_coupon:
    input:
        data_raw_paths("coupon"),
    output:
        features=f"{DATA_PROCESSED}/coupon/features.npz",
    params:
        dataset="coupon",
        options=data_options("coupon"),
    log:
        "logs/data/preprocess_coupon.log",
    benchmark:
        "benchmarks/data/preprocess_coupon.tsv"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    conda:
        "../envs/data.yaml"
    script:
        "../../scripts/preprocess_dataset.py"


rule build_instance:
    input:
        features=f"{DATA_PROCESSED}/{{dataset}}/features.npz",
    output:
        instance=f"{DATA_PROCESSED}/{{dataset}}/instance.npz",
        report=f"{DATA_PROCESSED}/{{dataset}}/report.json",
    params:
        arrival_rate=lambda wildcards: DATA_CONFIG["datasets"][wildcards.dataset]["arrival_rate"],
        C=DATA_CONFIG["instance"]["C"],
        max_iter=DATA_CONFIG["instance"]["max_iter"],
    wildcard_constraints:
        dataset="|".join(DATA_DATASETS),
    log:
        "logs/data/build_instance_{dataset}.log",
    benchmark:
        "benchmarks/data/build_instance_{dataset}.tsv"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    conda:
        "../envs/data.yaml"
    script:
        "../../scripts/build_instance.py"
