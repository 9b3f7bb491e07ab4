"""Writes the small mesh files in tests/data/ with real tools: Gmsh meshes a box (MSH 4.1
and 2.2, ASCII and binary, as Gmsh itself writes them) and meshio converts that mesh to
legacy VTK (5.1 and 4.2, ASCII and binary), VTU (ASCII, zlib-compressed binary), TetGen
and Medit, and a Gmsh-meshed quad plate and sphere to PLY, STL and OBJ.

Not run by the tests (they read the committed files); rerun by hand to refresh them:

    python3 -m venv venv && venv/bin/pip install gmsh meshio numpy
    venv/bin/python tests/data/generate.py
"""

import os

import gmsh
import meshio
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


def path(name):
    return os.path.join(HERE, name)


def gmsh_box():
    gmsh.initialize()
    gmsh.option.setNumber("General.Terminal", 0)
    gmsh.model.add("box")
    gmsh.model.occ.addBox(0, 0, 0, 1.0, 0.5, 0.5)
    gmsh.model.occ.synchronize()
    gmsh.option.setNumber("Mesh.MeshSizeMin", 0.25)
    gmsh.option.setNumber("Mesh.MeshSizeMax", 0.25)
    gmsh.model.mesh.generate(3)
    for version, binary, name in [
        (4.1, 0, "box_v41.msh"),
        (4.1, 1, "box_v41_binary.msh"),
        (2.2, 0, "box_v22.msh"),
        (2.2, 1, "box_v22_binary.msh"),
    ]:
        gmsh.option.setNumber("Mesh.MshFileVersion", version)
        gmsh.option.setNumber("Mesh.Binary", binary)
        gmsh.write(path(name))
    gmsh.finalize()


def gmsh_surface(name, build, recombine):
    gmsh.initialize()
    gmsh.option.setNumber("General.Terminal", 0)
    gmsh.model.add(name)
    build()
    gmsh.model.occ.synchronize()
    gmsh.option.setNumber("Mesh.MeshSizeMin", 0.3)
    gmsh.option.setNumber("Mesh.MeshSizeMax", 0.3)
    if recombine:
        gmsh.option.setNumber("Mesh.RecombineAll", 1)
        gmsh.option.setNumber("Mesh.Algorithm", 8)
    gmsh.model.mesh.generate(2)
    gmsh.option.setNumber("Mesh.MshFileVersion", 4.1)
    gmsh.option.setNumber("Mesh.Binary", 0)
    tmp = path(name + ".tmp.msh")
    gmsh.write(tmp)
    gmsh.finalize()
    m = meshio.read(tmp)
    os.remove(tmp)
    return m


def only(mesh, kinds):
    cells = [c for c in mesh.cells if c.type in kinds]
    used = np.unique(np.concatenate([c.data.ravel() for c in cells]))
    remap = -np.ones(len(mesh.points), dtype=np.int64)
    remap[used] = np.arange(len(used))
    return meshio.Mesh(mesh.points[used], [(c.type, remap[c.data]) for c in cells])


def main():
    gmsh_box()
    box = only(meshio.read(path("box_v41.msh")), {"tetra"})
    meshio.write(path("box_51.vtk"), box, binary=False)
    meshio.write(path("box_51_binary.vtk"), box, binary=True)
    meshio.vtk.write(path("box_42.vtk"), box, binary=False, fmt_version="4.2")
    meshio.vtk.write(path("box_42_binary.vtk"), box, binary=True, fmt_version="4.2")
    meshio.write(path("box_ascii.vtu"), box, binary=False)
    meshio.write(path("box_zlib.vtu"), box, binary=True, compression="zlib")
    meshio.write(path("box.node"), box, file_format="tetgen")
    meshio.write(path("box.mesh"), box, file_format="medit")

    plate = gmsh_surface(
        "plate", lambda: gmsh.model.occ.addRectangle(0, 0, 0, 1.0, 1.0), recombine=True
    )
    plate = only(plate, {"quad", "triangle"})
    meshio.write(path("plate_ascii.ply"), plate, binary=False)
    meshio.write(path("plate_binary.ply"), plate, binary=True)
    meshio.write(path("plate.obj"), plate)

    sphere = gmsh_surface(
        "sphere", lambda: gmsh.model.occ.addSphere(0, 0, 0, 0.5), recombine=False
    )
    sphere = only(sphere, {"triangle"})
    meshio.write(path("sphere_ascii.stl"), sphere, binary=False)
    meshio.write(path("sphere_binary.stl"), sphere, binary=True)
    meshio.write(path("sphere_binary.ply"), sphere, binary=True)


if __name__ == "__main__":
    main()
