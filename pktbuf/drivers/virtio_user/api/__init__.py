"""The facade of the virtio-user port (:class:`.port.VirtioUserPort`)."""
