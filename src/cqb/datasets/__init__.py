"""The real datasets as the pipeline knows them: the registry (:mod:`cqb.datasets.registry`),
one declaration per dataset, below the data stack (it names its transforms, imports none)."""
