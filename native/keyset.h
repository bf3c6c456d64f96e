/* keyset.c: a set of byte strings built once from Arrow columns and probed many times (the methods rangewalk.c
 * registers in lakefs_rangewalk). */
#ifndef LAKEFS_RANGEWALK_KEYSET_H
#define LAKEFS_RANGEWALK_KEYSET_H

#include <Python.h>

PyObject *keyset_build(PyObject *self, PyObject *args);
PyObject *keyset_holds(PyObject *self, PyObject *args);
PyObject *keyset_size(PyObject *self, PyObject *args);
PyObject *keyset_hashes(PyObject *self, PyObject *args);

#endif
