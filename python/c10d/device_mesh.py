"""torch.distributed's DeviceMesh and init_device_mesh over the default group: its ranks as an
n-dimensional array (row-major), a group per dimension for each rank (new_subgroups_by_enumeration,
so every rank calls init_device_mesh with the same arguments), named dimensions, slicing by name.
Ranks are global ranks. `mesh` is a nested list (torch: a tensor)."""

import math

from . import distributed as _dist
from .errors import InvalidArgument


class DeviceMesh:
    """A mesh made by init_device_mesh, or a slice of one (mesh["dp"], mesh["dp", "tp"])."""

    def __init__(self, device_type, shape, names, coordinate, ranks, groups):
        self.device_type = device_type
        self._shape, self._names = tuple(shape), names
        self._coordinate, self._ranks, self._groups = list(coordinate), list(ranks), list(groups)

    @property
    def mesh_dim_names(self):
        return self._names

    @property
    def ndim(self):
        return len(self._shape)

    @property
    def shape(self):
        return self._shape

    @property
    def mesh(self):
        """The ranks as nested lists of the mesh's shape."""
        def nest(flat, shape):
            if len(shape) == 1:
                return list(flat)
            step = len(flat) // shape[0]
            return [nest(flat[i * step:(i + 1) * step], shape[1:]) for i in range(shape[0])]
        return nest(self._ranks, self._shape)

    def size(self, mesh_dim=None):
        return math.prod(self._shape) if mesh_dim is None else self._shape[self._dim(mesh_dim)]

    def _dim(self, mesh_dim):
        if mesh_dim is None:
            if self.ndim != 1:
                raise InvalidArgument(f"DeviceMesh: name a dimension of this {self.ndim}-dimensional "
                                      "mesh")
            return 0
        if isinstance(mesh_dim, str):
            if not self._names or mesh_dim not in self._names:
                raise InvalidArgument(f"DeviceMesh: no dimension named {mesh_dim!r} (the mesh's: "
                                      f"{self._names})")
            return self._names.index(mesh_dim)
        if not 0 <= mesh_dim < self.ndim:
            raise InvalidArgument(f"DeviceMesh: dimension {mesh_dim} of a {self.ndim}-dimensional "
                                  "mesh")
        return mesh_dim

    def get_group(self, mesh_dim=None):
        return self._groups[self._dim(mesh_dim)]

    def get_all_groups(self):
        return list(self._groups)

    def get_local_rank(self, mesh_dim=None):
        return self._coordinate[self._dim(mesh_dim)]

    def get_coordinate(self):
        return list(self._coordinate)

    def __getitem__(self, names):
        names = (names,) if isinstance(names, str) else tuple(names)
        dims = [self._dim(name) for name in names]
        if any(b <= a for a, b in zip(dims, dims[1:])):
            raise InvalidArgument(f"DeviceMesh: {list(names)} are not in the mesh's order "
                                  f"{self._names} (or repeat)")
        shape = [self._shape[d] for d in dims]
        strides = [math.prod(self._shape[d + 1:]) for d in range(self.ndim)]
        ranks = []
        for k in range(math.prod(shape)):
            coordinate = list(self._coordinate)
            for i in reversed(range(len(dims))):
                coordinate[dims[i]] = k % shape[i]
                k //= shape[i]
            ranks.append(self._ranks[sum(c * s for c, s in zip(coordinate, strides))])
        return DeviceMesh(self.device_type, shape, tuple(names),
                          [self._coordinate[d] for d in dims], ranks, [self._groups[d] for d in dims])

    def __repr__(self):
        return f"DeviceMesh({self.device_type!r}, {self.mesh}, mesh_dim_names={self._names})"


def init_device_mesh(device_type, mesh_shape, *, mesh_dim_names=None):
    """The default group's ranks as a mesh of mesh_shape (its product: the world size)."""
    shape = tuple(int(s) for s in mesh_shape)
    world = _dist.get_world_size()
    if not shape or any(s < 1 for s in shape):
        raise InvalidArgument(f"init_device_mesh: mesh shape {shape} needs dimensions of 1 or more")
    if math.prod(shape) != world:
        raise InvalidArgument(f"init_device_mesh: mesh shape {shape} makes {math.prod(shape)} "
                              f"ranks; the default group has {world}")
    if mesh_dim_names is not None:
        names = tuple(mesh_dim_names)
        if len(names) != len(shape):
            raise InvalidArgument(f"init_device_mesh: {len(names)} names for {len(shape)} "
                                  "dimensions")
        if len(set(names)) != len(names):
            raise InvalidArgument(f"init_device_mesh: dimension names {names} repeat; each "
                                  "dimension needs a name of its own")
    else:
        names = None
    rank = _dist.get_rank()
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    groups = []
    for d in range(len(shape)):
        lines = [[base + i * strides[d] for i in range(shape[d])]
                 for base in range(world) if base // strides[d] % shape[d] == 0]
        mine, _ = _dist.new_subgroups_by_enumeration(lines)
        groups.append(mine)
    coordinate = [rank // strides[d] % shape[d] for d in range(len(shape))]
    return DeviceMesh(device_type, shape, names, coordinate, range(world), groups)
