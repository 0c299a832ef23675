"""Object stores for the lab: one interface (``store.ObjectStore``), one class per store; and a Spark
standalone cluster on this machine (``SparkCluster``), started and stopped like the local stores."""

from __future__ import annotations

from .ceph import CephStore, CephTlsStore
from .embedded import EmbeddedStore
from .minio import MinioStore
from .remote import AwsS3Store, EndpointStore
from .seaweedfs import SeaweedfsStore
from .spark_cluster import SparkCluster
from .store import Credentials, ObjectStore, StoreUnavailable

STORES: dict[str, type[ObjectStore]] = {
    cls.name: cls for cls in (EmbeddedStore, CephStore, CephTlsStore, SeaweedfsStore, MinioStore, AwsS3Store,
                              EndpointStore)
}


def store_class(name: str) -> type[ObjectStore]:
    try:
        return STORES[name]
    except KeyError:
        raise StoreUnavailable(f"unknown store '{name}'; valid stores: {', '.join(STORES)}") from None


__all__ = ["STORES", "AwsS3Store", "CephStore", "CephTlsStore", "Credentials", "EmbeddedStore", "EndpointStore",
           "MinioStore", "ObjectStore", "SeaweedfsStore", "SparkCluster", "StoreUnavailable", "store_class"]
