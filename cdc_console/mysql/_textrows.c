/*
 * Text-protocol row packets parsed into Arrow's large_binary column buffers.
 *
 * The compiled half of cdc_console/mysql/rawrows.py: the same parser as its pure-Python
 * PyRowColumns, value for value and status for status (tests/unit/test_textrows.py holds the
 * two to each other). Python keeps the socket, the rare packets (errors, rows of 16 MiB or
 * more, which it joins and hands to add_row) and every error message; this file only walks
 * complete row packets in a buffer and appends their values to per-column buffers, so a
 * chunk's rows never become Python objects.
 *
 * A row packet: 3-byte little-endian payload length, 1-byte sequence number, payload. The
 * payload is one length-encoded string per column: a first byte < 0xFB is the length, 0xFB is
 * NULL, 0xFC/0xFD/0xFE are followed by a 2/3/8-byte length. The result's end is an EOF packet
 * (0xFE, payload shorter than 9 bytes); 0xFF starts an error packet.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

#define MAX_PACKET_LEN 0xFFFFFF

enum { NEED_MORE = 0, END = 1, SPECIAL = 2, BAD_SEQUENCE = 3, MALFORMED = 4 };

typedef struct {
    char *data;
    int64_t size, cap;
    int64_t *offsets; /* rows + 1 entries */
    int64_t ocap;
    uint8_t *validity; /* NULL until the column's first NULL; a set bit is a value */
    int64_t vcap;      /* bytes */
    int64_t nulls;
} Column;

typedef struct {
    const uint8_t *at; /* NULL for SQL NULL */
    uint64_t size;
} Value;

typedef struct {
    PyObject_HEAD
    Py_ssize_t ncols;
    int64_t rows;
    Column *cols;
    Value *row; /* one parsed row, appended only once it is whole */
} RowColumns;

static void
columns_free(RowColumns *self)
{
    if (self->cols != NULL) {
        for (Py_ssize_t c = 0; c < self->ncols; c++) {
            PyMem_Free(self->cols[c].data);
            PyMem_Free(self->cols[c].offsets);
            PyMem_Free(self->cols[c].validity);
        }
        PyMem_Free(self->cols);
        self->cols = NULL;
    }
    PyMem_Free(self->row);
    self->row = NULL;
}

static void
RowColumns_dealloc(RowColumns *self)
{
    columns_free(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
RowColumns_init(RowColumns *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"count", NULL};
    Py_ssize_t count;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "n", kwlist, &count)) {
        return -1;
    }
    if (count < 1) {
        PyErr_SetString(PyExc_ValueError, "a result has at least one column");
        return -1;
    }
    columns_free(self);
    self->ncols = count;
    self->rows = 0;
    self->cols = PyMem_Calloc((size_t)count, sizeof(Column));
    self->row = PyMem_Calloc((size_t)count, sizeof(Value));
    if (self->cols == NULL || self->row == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    for (Py_ssize_t c = 0; c < count; c++) {
        Column *col = &self->cols[c];
        col->ocap = 1024;
        col->offsets = PyMem_Malloc((size_t)col->ocap * sizeof(int64_t));
        if (col->offsets == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        col->offsets[0] = 0;
    }
    return 0;
}

/* Parse one row payload into self->row; -1 when its values do not fill it exactly. */
static int
parse_row(RowColumns *self, const uint8_t *p, uint64_t n)
{
    uint64_t i = 0;
    for (Py_ssize_t c = 0; c < self->ncols; c++) {
        if (i >= n) {
            return -1;
        }
        uint64_t size = p[i];
        if (size < 0xFB) {
            i += 1;
        } else if (size == 0xFB) {
            self->row[c].at = NULL;
            self->row[c].size = 0;
            i += 1;
            continue;
        } else if (size == 0xFC) {
            if (n - i < 3) return -1;
            size = (uint64_t)p[i + 1] | (uint64_t)p[i + 2] << 8;
            i += 3;
        } else if (size == 0xFD) {
            if (n - i < 4) return -1;
            size = (uint64_t)p[i + 1] | (uint64_t)p[i + 2] << 8 | (uint64_t)p[i + 3] << 16;
            i += 4;
        } else if (size == 0xFE) {
            if (n - i < 9) return -1;
            size = 0;
            for (int b = 8; b >= 1; b--) {
                size = size << 8 | p[i + b];
            }
            i += 9;
        } else {
            return -1;
        }
        if (size > n - i) {
            return -1;
        }
        self->row[c].at = p + i;
        self->row[c].size = size;
        i += size;
    }
    return i == n ? 0 : -1;
}

static int
grow(void **buf, int64_t *cap, int64_t need, size_t item)
{
    if (need <= *cap) {
        return 0;
    }
    int64_t next = *cap > 0 ? *cap : 64;
    while (next < need) {
        next *= 2;
    }
    void *grown = PyMem_Realloc(*buf, (size_t)next * item);
    if (grown == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    *buf = grown;
    *cap = next;
    return 0;
}

/* Make the validity bitmap cover ``nbytes`` bytes, the new ones all valid; -1 on MemoryError. */
static int
cover_validity(Column *col, int64_t nbytes)
{
    if (nbytes <= col->vcap) {
        return 0;
    }
    int64_t old = col->vcap;
    if (grow((void **)&col->validity, &col->vcap, nbytes, 1) < 0) {
        return -1;
    }
    memset(col->validity + old, 0xFF, (size_t)(col->vcap - old));
    return 0;
}

/* Append the parsed row to the columns; -1 with MemoryError set. */
static int
append_row(RowColumns *self)
{
    int64_t row = self->rows;
    for (Py_ssize_t c = 0; c < self->ncols; c++) {
        Column *col = &self->cols[c];
        Value *v = &self->row[c];
        if (grow((void **)&col->offsets, &col->ocap, row + 2, sizeof(int64_t)) < 0) {
            return -1;
        }
        if (v->at == NULL) {
            if (cover_validity(col, row / 8 + 1) < 0) {
                return -1;
            }
            col->validity[row / 8] &= (uint8_t) ~(1u << (row % 8));
            col->nulls++;
        } else if (v->size > 0) {
            if (grow((void **)&col->data, &col->cap, col->size + (int64_t)v->size, 1) < 0) {
                return -1;
            }
            memcpy(col->data + col->size, v->at, v->size);
            col->size += (int64_t)v->size;
        }
        col->offsets[row + 1] = col->size;
    }
    self->rows = row + 1;
    return 0;
}

static PyObject *
RowColumns_feed(RowColumns *self, PyObject *args)
{
    Py_buffer view;
    Py_ssize_t pos;
    int seq;
    if (self->cols == NULL) {
        PyErr_SetString(PyExc_ValueError, "RowColumns was not initialised");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "y*ni", &view, &pos, &seq)) {
        return NULL;
    }
    const uint8_t *buf = view.buf;
    Py_ssize_t len = view.len;
    int status = NEED_MORE;
    if (pos < 0 || pos > len) {
        PyBuffer_Release(&view);
        PyErr_SetString(PyExc_ValueError, "position outside the buffer");
        return NULL;
    }
    for (;;) {
        if (len - pos < 4) {
            break;
        }
        const uint8_t *h = buf + pos;
        uint64_t length = (uint64_t)h[0] | (uint64_t)h[1] << 8 | (uint64_t)h[2] << 16;
        if (h[3] != seq) {
            status = BAD_SEQUENCE;
            break;
        }
        if (length == MAX_PACKET_LEN) {
            status = SPECIAL;
            break;
        }
        if ((uint64_t)(len - pos - 4) < length) {
            break;
        }
        const uint8_t *payload = h + 4;
        if (length == 0) {
            status = MALFORMED;
            break;
        }
        if (payload[0] == 0xFE && length < 9) {
            pos += 4 + (Py_ssize_t)length;
            seq = (seq + 1) & 0xFF;
            status = END;
            break;
        }
        if (payload[0] == 0xFF) {
            status = SPECIAL;
            break;
        }
        if (parse_row(self, payload, length) < 0) {
            status = MALFORMED;
            break;
        }
        if (append_row(self) < 0) {
            PyBuffer_Release(&view);
            return NULL;
        }
        pos += 4 + (Py_ssize_t)length;
        seq = (seq + 1) & 0xFF;
    }
    PyBuffer_Release(&view);
    return Py_BuildValue("nii", pos, seq, status);
}

static PyObject *
RowColumns_add_row(RowColumns *self, PyObject *arg)
{
    Py_buffer view;
    if (self->cols == NULL) {
        PyErr_SetString(PyExc_ValueError, "RowColumns was not initialised");
        return NULL;
    }
    if (PyObject_GetBuffer(arg, &view, PyBUF_SIMPLE) < 0) {
        return NULL;
    }
    int bad = parse_row(self, view.buf, (uint64_t)view.len);
    int failed = bad == 0 ? append_row(self) : 0;
    PyBuffer_Release(&view);
    if (bad) {
        PyErr_SetString(PyExc_ValueError, "row packet's values do not fill it");
        return NULL;
    }
    if (failed) {
        return NULL;
    }
    Py_RETURN_NONE;
}

static PyObject *
RowColumns_finish(RowColumns *self, PyObject *Py_UNUSED(ignored))
{
    if (self->cols == NULL) {
        PyErr_SetString(PyExc_ValueError, "RowColumns was not initialised");
        return NULL;
    }
    PyObject *out = PyList_New(self->ncols);
    if (out == NULL) {
        return NULL;
    }
    for (Py_ssize_t c = 0; c < self->ncols; c++) {
        Column *col = &self->cols[c];
        PyObject *validity;
        if (col->nulls > 0) {
            /* the bitmap grew only with the NULLs: the rows after the last one are valid */
            if (cover_validity(col, (self->rows + 7) / 8) < 0) {
                Py_DECREF(out);
                return NULL;
            }
            validity = PyBytes_FromStringAndSize(
                (const char *)col->validity, (Py_ssize_t)((self->rows + 7) / 8));
        } else {
            validity = Py_NewRef(Py_None);
        }
        PyObject *item = Py_BuildValue(
            "(Ny#y#L)",
            validity,
            (const char *)col->offsets, (Py_ssize_t)((self->rows + 1) * (int64_t)sizeof(int64_t)),
            col->data != NULL ? col->data : "", (Py_ssize_t)col->size,
            (long long)col->nulls);
        if (item == NULL) {
            Py_DECREF(out);
            return NULL;
        }
        PyList_SET_ITEM(out, c, item);
    }
    return out;
}

static PyObject *
RowColumns_get_rows(RowColumns *self, void *Py_UNUSED(closure))
{
    return PyLong_FromLongLong((long long)self->rows);
}

static PyMethodDef RowColumns_methods[] = {
    {"feed", (PyCFunction)RowColumns_feed, METH_VARARGS,
     "feed(buffer, pos, seq) -> (pos, seq, status): parse the whole row packets from pos on."},
    {"add_row", (PyCFunction)RowColumns_add_row, METH_O,
     "add_row(payload): one row's joined payload (a row of 16 MiB or more)."},
    {"finish", (PyCFunction)RowColumns_finish, METH_NOARGS,
     "finish() -> [(validity, offsets, data, null_count)] per column, Arrow large_binary."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef RowColumns_getset[] = {
    {"rows", (getter)RowColumns_get_rows, NULL, "rows appended so far", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject RowColumnsType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdc_console.mysql._textrows.RowColumns",
    .tp_doc = "A result's row packets gathered into Arrow large_binary buffers per column.",
    .tp_basicsize = sizeof(RowColumns),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)RowColumns_init,
    .tp_dealloc = (destructor)RowColumns_dealloc,
    .tp_methods = RowColumns_methods,
    .tp_getset = RowColumns_getset,
};

static struct PyModuleDef textrows_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cdc_console.mysql._textrows",
    .m_doc = "Compiled text-protocol row parser (see cdc_console/mysql/rawrows.py).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__textrows(void)
{
    if (PyType_Ready(&RowColumnsType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&textrows_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "RowColumns", (PyObject *)&RowColumnsType) < 0
        || PyModule_AddIntConstant(m, "NEED_MORE", NEED_MORE) < 0
        || PyModule_AddIntConstant(m, "END", END) < 0
        || PyModule_AddIntConstant(m, "SPECIAL", SPECIAL) < 0
        || PyModule_AddIntConstant(m, "BAD_SEQUENCE", BAD_SEQUENCE) < 0
        || PyModule_AddIntConstant(m, "MALFORMED", MALFORMED) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
