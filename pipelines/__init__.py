"""Apache Beam pipelines: composite PTransforms that wire `corpus/` functions together,
and the entry points `cloze` calls. No data logic lives here."""
