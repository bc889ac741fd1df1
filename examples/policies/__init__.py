"""Example external policies: ``policy: {kind: external, class: "examples.policies.<module>:<Class>"}``."""
