"""``agentstream_changelog``: the PySpark Python data source of a changelog, for batch reads
(:class:`~.source.ChangelogReader`) and streaming reads (:class:`~.stream.ChangelogStreamReader`).

Registered by :func:`.spark.register`; options are described in :mod:`.source` and :mod:`.stream`.
"""

from __future__ import annotations

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .source import SOURCE_NAME, ChangelogReader, bookkeeping, spec_from
from .stream import ChangelogStreamReader

__all__ = ["ChangelogDataSource"]


class ChangelogDataSource(DataSource):  # type: ignore[misc]
    """``spark.read.format("agentstream_changelog")``: see the module docstring."""

    @classmethod
    def name(cls) -> str:
        return SOURCE_NAME

    def schema(self) -> StructType:
        return spec_from(self.options).spark_schema(bookkeeping=bookkeeping(self.options))

    def reader(self, schema: StructType) -> ChangelogReader:
        return ChangelogReader(dict(self.options), schema)

    def streamReader(self, schema: StructType) -> ChangelogStreamReader:
        """``spark.readStream.format("agentstream_changelog")``: see :mod:`.stream`."""
        return ChangelogStreamReader(dict(self.options), schema)
