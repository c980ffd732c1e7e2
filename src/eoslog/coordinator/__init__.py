"""Coordinators that sit beside the partitions and persist through internal topics."""
