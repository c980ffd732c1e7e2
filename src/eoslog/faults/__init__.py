"""Fault machinery below the verifier: a network of Linux network namespaces whose links nftables rules
cut (netns.py, nftables.py), and a filesystem that forgets what was not synced (lazyfs.py). Each part
creates only what it names with its own prefix and removes it again; none touches the machine's own
interfaces, routes, firewall or filesystems."""
