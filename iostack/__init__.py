"""IOStack: policy-driven software-defined storage for OpenStack Swift and iSCSI volumes."""

__version__ = "0.1.0"
