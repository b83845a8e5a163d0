# Real datasets (docs/model.md#real-data-pools, docs/data.md): fetch -> preprocess -> pool instance.
#
# Final outputs: data/processed/{dataset}/instance.npz and report.json,
# dataset in DATA_DATASETS. How a dataset is read is its entry in the dataset registry
# (cqb.datasets.registry): the datasets of plain files (DATA_TABULAR) share one download rule
# (a job per file) and one preprocess rule; a dataset of MNIST archives (DATA_MNIST_READ)
# has two of its own, download_<dataset> and preprocess_<dataset>, since the MNIST reader
# (torchvision, or numpy without PyTorch: cqb.data.mnist_reader) extracts and reads its
# archives. No target rule here, so the including Snakefile's first rule stays the
# default target. Paths are relative to the working directory (repo root).


include: "data_common.smk"


# Downloads need the network (or only the local mirror): never send them to a cluster node.
localrules:
    download_dataset_file,


for _dataset in DATA_MNIST_READ:

    rule:
        name:
            f"download_{_dataset}"
        output:
            archives=data_mnist_archives(_dataset),
            extracted=data_mnist_extracted(_dataset),
        log:
            f"logs/data/download_{_dataset}.log",
        benchmark:
            f"benchmarks/data/download_{_dataset}.tsv"
        localrule: True
        conda:
            "../envs/mnist.yaml"
        threads: 1
        resources:
            mem_mb=2000,
            runtime=30,
        params:
            # archives sit at <root>/MNIST/raw/<name>
            root=lambda wildcards, output: str(Path(output.archives[0]).parents[2]),
            dataset=_dataset,
            sha256=data_checksums(_dataset),
        script:
            "../../scripts/fetch_mnist.py"

    rule:
        name:
            f"preprocess_{_dataset}"
        input:
            data_mnist_archives(_dataset),
            data_mnist_extracted(_dataset),
        output:
            features=f"{DATA_PROCESSED}/{_dataset}/features.npz",
        log:
            f"logs/data/preprocess_{_dataset}.log",
        benchmark:
            f"benchmarks/data/preprocess_{_dataset}.tsv"
        conda:
            "../envs/mnist.yaml"
        threads: 1
        resources:
            mem_mb=3000,
            runtime=20,
        params:
            dataset=_dataset,
            options=data_options(_dataset),
            mnist_root=lambda wildcards, input: str(Path(input[0]).parents[2]),
        script:
            "../../scripts/preprocess_dataset.py"


rule download_dataset_file:
    output:
        f"{DATA_RAW}/{{dataset}}/{{file}}",
    log:
        "logs/data/download_{dataset}_{file}.log",
    benchmark:
        "benchmarks/data/download_{dataset}_{file}.tsv"
    wildcard_constraints:
        dataset=data_alternatives(DATA_TABULAR),
        file=data_alternatives(DATA_TABULAR_FILES),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=500,
        runtime=10,
    params:
        dataset=lambda wildcards: wildcards.dataset,
        sha256=lambda wildcards: data_checksums(wildcards.dataset, [wildcards.file]),
    script:
        "../../scripts/fetch_dataset.py"


rule preprocess_dataset:
    input:
        lambda wildcards: data_raw_paths(wildcards.dataset),
    output:
        features=f"{DATA_PROCESSED}/{{dataset}}/features.npz",
    log:
        "logs/data/preprocess_{dataset}.log",
    benchmark:
        "benchmarks/data/preprocess_{dataset}.tsv"
    wildcard_constraints:
        dataset=data_alternatives(DATA_TABULAR),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        dataset=lambda wildcards: wildcards.dataset,
        options=lambda wildcards: data_options(wildcards.dataset),
    script:
        "../../scripts/preprocess_dataset.py"


rule build_instance:
    input:
        features=f"{DATA_PROCESSED}/{{dataset}}/features.npz",
    output:
        instance=f"{DATA_PROCESSED}/{{dataset}}/instance.npz",
        report=f"{DATA_PROCESSED}/{{dataset}}/report.json",
    log:
        "logs/data/build_instance_{dataset}.log",
    benchmark:
        "benchmarks/data/build_instance_{dataset}.tsv"
    wildcard_constraints:
        dataset=data_alternatives(DATA_DATASETS),
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        C=DATA_CONFIG["instance"]["C"],
        max_iter=DATA_CONFIG["instance"]["max_iter"],
    script:
        "../../scripts/build_instance.py"


rule preprocess_variant:
    input:
        lambda wildcards: data_raw_paths(wildcards.dataset),
    output:
        features=f"{DATA_VARIANTS}/{{dataset}}-{{variant}}/features.npz",
    log:
        "logs/data/preprocess_{dataset}-{variant}.log",
    benchmark:
        "benchmarks/data/preprocess_{dataset}-{variant}.tsv"
    wildcard_constraints:
        dataset=data_alternatives(DATA_TABULAR),
        variant=data_alternatives(DATA_VARIANT_CONFIG) or "^$",
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=1000,
        runtime=10,
    params:
        dataset=lambda wildcards: wildcards.dataset,
        options=lambda wildcards: data_variant_options(wildcards.dataset, wildcards.variant),
    script:
        "../../scripts/preprocess_dataset.py"


rule build_variant_instance:
    input:
        features=data_variant_features,
    output:
        instance=f"{DATA_VARIANTS}/{{dataset}}-{{variant}}/instance.npz",
        report=f"{DATA_VARIANTS}/{{dataset}}-{{variant}}/report.json",
    log:
        "logs/data/build_instance_{dataset}-{variant}.log",
    benchmark:
        "benchmarks/data/build_instance_{dataset}-{variant}.tsv"
    wildcard_constraints:
        dataset=data_alternatives(DATA_DATASETS),
        variant=data_alternatives(DATA_VARIANT_CONFIG) or "^$",
    conda:
        "../envs/data.yaml"
    threads: 1
    resources:
        mem_mb=2000,
        runtime=20,
    params:
        variant=lambda wildcards: {"name": wildcards.variant, **DATA_VARIANT_CONFIG[wildcards.variant]},
        dataset=lambda wildcards: wildcards.dataset,
        max_iter=DATA_CONFIG["instance"]["max_iter"],
    script:
        "../../scripts/build_variant_instance.py"
