/*
 * One row image of a binlog row event, decoded in C: the compiled half of
 * cdc_console/mysql/row_images.py (RowsPlan._image and the column readers it covers).
 *
 * It must give exactly what the Python readers give, which give exactly what
 * pymysqlreplication 1.0.17 gives: the same Python values, the same none-sources side effects.
 * Where anything is off (short data, a value the library would reject or turn into something
 * odd) it raises, and the caller lets the library decode the untouched event, as it does for the
 * Python readers' exceptions. Column types it does not cover (TIME2, ENUM, SET, BIT, GEOMETRY,
 * JSON) keep their Python reader, called from here. tests/unit/test_binlog_decode.py holds both
 * decoders to the library, event by event, garbage included.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <datetime.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum Kind {
    K_PYTHON = 0,  /* obj: the Python reader, read(data, pos, sources) -> (value, pos) */
    K_INT = 1,     /* a: size 1, 2, 4 or 8; b: unsigned */
    K_INT24 = 2,   /* b: unsigned */
    K_FLOAT = 3,
    K_DOUBLE = 4,
    K_STRING = 5,  /* a: length size 1..8; obj: encoding (str) or None; errors: "strict"/"ignore" */
    K_DECIMAL = 6, /* a: precision; b: decimals */
    K_DATETIME2 = 7, /* a: fsp */
    K_DATE = 8,
    K_TIMESTAMP2 = 9, /* a: fsp */
    K_YEAR = 10,
};

static const int COMPRESSED_BYTES[10] = {0, 1, 1, 2, 2, 3, 3, 4, 4, 4};

typedef struct {
    PyObject *key;        /* the values dict's key */
    PyObject *source_key; /* the none-sources key: the column's name, or None */
    int kind;
    int a, b;
    PyObject *obj;     /* reader, or encoding */
    const char *errors; /* K_STRING */
    /* K_DECIMAL */
    int size_i, size_f, uncomp_integral, uncomp_fractional, comp_fractional, total;
    /* K_DATETIME2, K_TIMESTAMP2 */
    int fsp_size, fsp_odd;
    long fsp_scale;
} Column;

typedef struct {
    PyObject_HEAD
    Py_ssize_t count;
    Column *columns;
    PyObject *decimal;        /* decimal.Decimal */
    PyObject *from_timestamp; /* datetime.datetime.utcfromtimestamp */
    PyObject *null_source, *cols_bitmap_source;
} ImageDecoder;

static void
decoder_clear(ImageDecoder *self)
{
    if (self->columns != NULL) {
        for (Py_ssize_t i = 0; i < self->count; i++) {
            Py_XDECREF(self->columns[i].key);
            Py_XDECREF(self->columns[i].source_key);
            Py_XDECREF(self->columns[i].obj);
        }
        PyMem_Free(self->columns);
        self->columns = NULL;
    }
    self->count = 0;
    Py_CLEAR(self->decimal);
    Py_CLEAR(self->from_timestamp);
    Py_CLEAR(self->null_source);
    Py_CLEAR(self->cols_bitmap_source);
}

static void
ImageDecoder_dealloc(ImageDecoder *self)
{
    decoder_clear(self);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static int
setup_column(Column *col, PyObject *spec)
{
    PyObject *key, *source_key, *obj;
    const char *errors = "strict";
    if (!PyArg_ParseTuple(spec, "OOiiiO|s", &key, &source_key, &col->kind, &col->a, &col->b,
                          &obj, &errors)) {
        return -1;
    }
    col->key = Py_NewRef(key);
    col->source_key = Py_NewRef(source_key);
    col->obj = Py_NewRef(obj);
    col->errors = strcmp(errors, "ignore") == 0 ? "ignore" : "strict";
    switch (col->kind) {
    case K_PYTHON:
        if (!PyCallable_Check(obj)) {
            PyErr_SetString(PyExc_TypeError, "a Python column needs its reader");
            return -1;
        }
        break;
    case K_INT:
        if (col->a != 1 && col->a != 2 && col->a != 4 && col->a != 8) {
            PyErr_SetString(PyExc_ValueError, "integer size");
            return -1;
        }
        break;
    case K_STRING:
        if (col->a < 1 || col->a > 8 || (obj != Py_None && !PyUnicode_Check(obj))) {
            PyErr_SetString(PyExc_ValueError, "string column");
            return -1;
        }
        break;
    case K_DECIMAL: {
        int integral = col->a - col->b;
        if (col->a < 0 || col->b < 0 || integral < 0) {
            PyErr_SetString(PyExc_ValueError, "decimal column");
            return -1;
        }
        col->uncomp_integral = integral / 9;
        col->uncomp_fractional = col->b / 9;
        int comp_integral = integral - col->uncomp_integral * 9;
        col->comp_fractional = col->b - col->uncomp_fractional * 9;
        col->size_i = COMPRESSED_BYTES[comp_integral];
        col->size_f = COMPRESSED_BYTES[col->comp_fractional];
        col->total = col->size_i + 4 * col->uncomp_integral + 4 * col->uncomp_fractional
                     + col->size_f;
        if (col->total == 0) {
            PyErr_SetString(PyExc_ValueError, "empty decimal");
            return -1;
        }
        break;
    }
    case K_DATETIME2:
    case K_TIMESTAMP2: {
        static const int fsp_bytes[7] = {0, 1, 1, 2, 2, 3, 3};
        int fsp = col->a;
        col->fsp_size = (fsp >= 1 && fsp <= 6) ? fsp_bytes[fsp] : 0;
        col->fsp_odd = fsp % 2;
        col->fsp_scale = 1;
        for (int i = 0; i < 6 - fsp && col->fsp_size > 0; i++) {
            col->fsp_scale *= 10;
        }
        break;
    }
    case K_INT24:
    case K_FLOAT:
    case K_DOUBLE:
    case K_DATE:
    case K_YEAR:
        break;
    default:
        PyErr_SetString(PyExc_ValueError, "unknown column kind");
        return -1;
    }
    return 0;
}

static int
ImageDecoder_init(ImageDecoder *self, PyObject *args, PyObject *kwds)
{
    static char *kwlist[] = {"columns", "decimal", "from_timestamp", "null_source",
                             "cols_bitmap_source", NULL};
    PyObject *columns, *decimal, *from_timestamp, *null_source, *cols_bitmap;
    if (!PyArg_ParseTupleAndKeywords(args, kwds, "O!OOUU", kwlist, &PyList_Type, &columns,
                                     &decimal, &from_timestamp, &null_source, &cols_bitmap)) {
        return -1;
    }
    decoder_clear(self);
    Py_ssize_t count = PyList_GET_SIZE(columns);
    self->columns = PyMem_Calloc((size_t)(count > 0 ? count : 1), sizeof(Column));
    if (self->columns == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    self->count = count;
    for (Py_ssize_t i = 0; i < count; i++) {
        if (setup_column(&self->columns[i], PyList_GET_ITEM(columns, i)) < 0) {
            return -1;
        }
    }
    self->decimal = Py_NewRef(decimal);
    self->from_timestamp = Py_NewRef(from_timestamp);
    self->null_source = Py_NewRef(null_source);
    self->cols_bitmap_source = Py_NewRef(cols_bitmap);
    return 0;
}

static int
short_data(const char *what)
{
    PyErr_Format(PyExc_ValueError, "short %s", what);
    return -1;
}

static uint64_t
uint_le(const uint8_t *p, int size)
{
    uint64_t v = 0;
    for (int i = size - 1; i >= 0; i--) {
        v = v << 8 | p[i];
    }
    return v;
}

/* A signed big-endian integer of 1..4 bytes (read_int_be_by_size). */
static long
be_signed(const uint8_t *p, int size)
{
    uint32_t v = 0;
    for (int i = 0; i < size; i++) {
        v = v << 8 | p[i];
    }
    int shift = 32 - 8 * size;
    return (long)((int32_t)(v << shift) >> shift);
}

/* The fractional seconds in microseconds (__read_fsp); -1 with an exception when short. */
static int
read_fsp(const Column *col, const uint8_t *data, Py_ssize_t len, Py_ssize_t *pos, long *micro)
{
    *micro = 0;
    if (col->fsp_size == 0) {
        return 0;
    }
    if (len < *pos + col->fsp_size) {
        return short_data("big-endian int");
    }
    long v = be_signed(data + *pos, col->fsp_size);
    if (col->fsp_odd) {
        v = v / 10; /* int(v / 10): truncates toward zero, as C does */
    }
    *micro = v * col->fsp_scale;
    *pos += col->fsp_size;
    return 0;
}

static int
days_in_month(int year, int month)
{
    static const int days[13] = {0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (month == 2 && ((year % 4 == 0 && year % 100 != 0) || year % 400 == 0)) {
        return 29;
    }
    return days[month];
}

/* The server's text of a date or datetime no calendar holds ('2024-04-31', '0000-00-00
   00:00:00.000'), as pymysql hands it back from a snapshot: the image's parts as they are,
   with the column's fractional digits (fsp < 0: a DATE). */
static PyObject *
invalid_date_text(int year, int month, int day, int hour, int minute, int second, long micro,
                  int fsp)
{
    char text[64];
    int n = snprintf(text, sizeof text, "%04d-%02d-%02d", year, month, day);
    if (fsp >= 0) {
        n += snprintf(text + n, sizeof text - (size_t)n, " %02d:%02d:%02d", hour, minute, second);
    }
    if (fsp > 0) {
        char fraction[32];
        snprintf(fraction, sizeof fraction, "%06ld", micro);
        n += snprintf(text + n, sizeof text - (size_t)n, ".%.*s", fsp > 6 ? 6 : fsp, fraction);
    }
    return PyUnicode_FromStringAndSize(text, n);
}

static int
set_source(PyObject *sources, PyObject *key, PyObject *why)
{
    return PyDict_SetItem(sources, key, why);
}

static PyObject *
read_decimal(ImageDecoder *self, const Column *col, const uint8_t *data, Py_ssize_t len,
             Py_ssize_t *pos)
{
    Py_ssize_t end = *pos + col->total;
    if (len < end) {
        short_data("decimal");
        return NULL;
    }
    uint8_t buf[128];
    if (col->total > (int)sizeof(buf)) {
        PyErr_SetString(PyExc_ValueError, "decimal too wide");
        return NULL;
    }
    memcpy(buf, data + *pos, (size_t)col->total);
    char text[512];
    size_t n = 0;
    int64_t mask;
    if (buf[0] & 0x80) {
        mask = 0;
    } else {
        mask = -1;
        text[n++] = '-';
    }
    buf[0] ^= 0x80;
    int at = 0;
    if (col->size_i > 0) {
        int64_t v = be_signed(buf, col->size_i);
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%lld", (long long)(v ^ mask));
        at = col->size_i;
    }
    for (int i = 0; i < col->uncomp_integral; i++) {
        int64_t v = be_signed(buf + at, 4);
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%09lld", (long long)(v ^ mask));
        at += 4;
    }
    text[n++] = '.';
    for (int i = 0; i < col->uncomp_fractional; i++) {
        int64_t v = be_signed(buf + at, 4);
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%09lld", (long long)(v ^ mask));
        at += 4;
    }
    if (col->size_f > 0) {
        int64_t v = be_signed(buf + at, col->size_f);
        n += (size_t)snprintf(text + n, sizeof(text) - n, "%0*lld", col->comp_fractional,
                              (long long)(v ^ mask));
    }
    if (n >= sizeof(text)) {
        PyErr_SetString(PyExc_ValueError, "decimal text too long");
        return NULL;
    }
    PyObject *str = PyUnicode_FromStringAndSize(text, (Py_ssize_t)n);
    if (str == NULL) {
        return NULL;
    }
    PyObject *value = PyObject_CallOneArg(self->decimal, str);
    Py_DECREF(str);
    if (value != NULL) {
        *pos = end;
    }
    return value;
}

/* One column's value; NULL with an exception set. */
static PyObject *
read_value(ImageDecoder *self, const Column *col, PyObject *data_obj, const uint8_t *data,
           Py_ssize_t len, Py_ssize_t *pos, PyObject *sources)
{
    Py_ssize_t p = *pos;
    switch (col->kind) {
    case K_INT: {
        int size = col->a;
        if (len < p + size) {
            short_data("integer");
            return NULL;
        }
        uint64_t u = uint_le(data + p, size);
        *pos = p + size;
        if (col->b) {
            return PyLong_FromUnsignedLongLong(u);
        }
        int shift = 64 - 8 * size;
        return PyLong_FromLongLong((long long)((int64_t)(u << shift) >> shift));
    }
    case K_INT24: {
        if (len < p + 3) {
            short_data("int24");
            return NULL;
        }
        uint64_t u = uint_le(data + p, 3);
        *pos = p + 3;
        if (col->b) {
            return PyLong_FromUnsignedLongLong(u);
        }
        return PyLong_FromLong((long)((int32_t)(u << 8) >> 8));
    }
    case K_FLOAT:
    case K_DOUBLE: {
        int size = col->kind == K_FLOAT ? 4 : 8;
        if (len < p + size) {
            short_data(col->kind == K_FLOAT ? "float" : "double");
            return NULL;
        }
        const char *at = (const char *)data + p;
        double v = size == 4 ? PyFloat_Unpack4(at, 1) : PyFloat_Unpack8(at, 1);
        if (v == -1.0 && PyErr_Occurred()) {
            return NULL;
        }
        *pos = p + size;
        return PyFloat_FromDouble(v);
    }
    case K_STRING: {
        int size = col->a;
        if (len < p + size) {
            short_data("uint");
            return NULL;
        }
        uint64_t length = uint_le(data + p, size);
        p += size;
        if ((uint64_t)(len - p) < length) {
            short_data("string");
            return NULL;
        }
        const char *raw = (const char *)data + p;
        PyObject *value;
        if (col->obj == Py_None) {
            value = PyUnicode_DecodeUTF8(raw, (Py_ssize_t)length, col->errors);
        } else {
            value = PyUnicode_Decode(raw, (Py_ssize_t)length, PyUnicode_AsUTF8(col->obj),
                                     col->errors);
            if (value == NULL && PyErr_ExceptionMatches(PyExc_LookupError)) {
                PyErr_Clear();
                value = PyBytes_FromStringAndSize(raw, (Py_ssize_t)length);
            }
        }
        if (value != NULL) {
            *pos = p + (Py_ssize_t)length;
        }
        return value;
    }
    case K_DECIMAL:
        return read_decimal(self, col, data, len, pos);
    case K_DATETIME2: {
        if (len < p + 5) {
            short_data("datetime2");
            return NULL;
        }
        uint64_t v = 0;
        for (int i = 0; i < 5; i++) {
            v = v << 8 | data[p + i];
        }
        p += 5;
        long year_month = (long)((v >> 22) & 0x1FFFF);
        int year = (int)(year_month / 13), month = (int)(year_month % 13);
        int day = (int)((v >> 17) & 0x1F), hour = (int)((v >> 12) & 0x1F);
        int minute = (int)((v >> 6) & 0x3F), second = (int)(v & 0x3F);
        long micro;
        if (read_fsp(col, data, len, &p, &micro) < 0) {
            return NULL;
        }
        if (year < 1 || year > 9999 || month < 1 || month > 12 || day < 1
            || day > days_in_month(year, month) || hour > 23 || minute > 59 || second > 59) {
            *pos = p;
            return invalid_date_text(year, month, day, hour, minute, second, micro, col->a);
        }
        if (micro > 999999) {
            PyErr_SetString(PyExc_ValueError, "microsecond must be in 0..999999");
            return NULL;
        }
        *pos = p;
        return PyDateTime_FromDateAndTime(year, month, day, hour, minute, second,
                                          micro > 0 ? (int)micro : 0);
    }
    case K_DATE: {
        if (len < p + 3) {
            short_data("date");
            return NULL;
        }
        uint64_t v = uint_le(data + p, 3);
        *pos = p + 3;
        int year = (int)((v >> 9) & 0x7FFF), month = (int)((v >> 5) & 0xF), day = (int)(v & 0x1F);
        /* zero parts, and a day past its month (ALLOW_INVALID_DATES: '2024-04-31'): its text,
           as the snapshot reads them (values/canonical.py) */
        if (v == 0 || year == 0 || month == 0 || day == 0 || month > 12
            || day > days_in_month(year, month)) {
            return invalid_date_text(year, month, day, 0, 0, 0, 0, -1);
        }
        return PyDate_FromDate(year, month, day);
    }
    case K_TIMESTAMP2: {
        if (len < p + 4) {
            short_data("big-endian int");
            return NULL;
        }
        PyObject *seconds = PyLong_FromLong(be_signed(data + p, 4));
        if (seconds == NULL) {
            return NULL;
        }
        PyObject *t = PyObject_CallOneArg(self->from_timestamp, seconds);
        Py_DECREF(seconds);
        if (t == NULL) {
            return NULL;
        }
        p += 4;
        long micro;
        if (read_fsp(col, data, len, &p, &micro) < 0) {
            Py_DECREF(t);
            return NULL;
        }
        *pos = p;
        if (micro <= 0) {
            return t;
        }
        if (micro > 999999 || !PyDateTime_Check(t)) {
            Py_DECREF(t);
            PyErr_SetString(PyExc_ValueError, "microsecond must be in 0..999999");
            return NULL;
        }
        PyObject *out = PyDateTime_FromDateAndTime(
            PyDateTime_GET_YEAR(t), PyDateTime_GET_MONTH(t), PyDateTime_GET_DAY(t),
            PyDateTime_DATE_GET_HOUR(t), PyDateTime_DATE_GET_MINUTE(t),
            PyDateTime_DATE_GET_SECOND(t), (int)micro);
        Py_DECREF(t);
        return out;
    }
    case K_YEAR:
        if (len < p + 1) {
            PyErr_SetString(PyExc_IndexError, "index out of range");
            return NULL;
        }
        *pos = p + 1;
        return PyLong_FromLong(data[p] + 1900);
    case K_PYTHON: {
        PyObject *at = PyLong_FromSsize_t(p);
        if (at == NULL) {
            return NULL;
        }
        PyObject *result = PyObject_CallFunctionObjArgs(col->obj, data_obj, at, sources, NULL);
        Py_DECREF(at);
        if (result == NULL) {
            return NULL;
        }
        if (!PyTuple_Check(result) || PyTuple_GET_SIZE(result) != 2) {
            Py_DECREF(result);
            PyErr_SetString(PyExc_TypeError, "a reader returns (value, pos)");
            return NULL;
        }
        Py_ssize_t next = PyLong_AsSsize_t(PyTuple_GET_ITEM(result, 1));
        if (next == -1 && PyErr_Occurred()) {
            Py_DECREF(result);
            return NULL;
        }
        if (next < p) {
            Py_DECREF(result);
            PyErr_SetString(PyExc_ValueError, "a reader moved backwards");
            return NULL;
        }
        PyObject *value = Py_NewRef(PyTuple_GET_ITEM(result, 0));
        Py_DECREF(result);
        *pos = next;
        return value;
    }
    default:
        PyErr_SetString(PyExc_ValueError, "unknown column kind");
        return NULL;
    }
}

/*
 * image(data, pos, present, null_bytes, full, sources) -> (values, none_sources, pos)
 *
 * RowsPlan._image followed by RowsPlan._none_sources: ``present`` is the columns-present
 * bitmap as a tuple of bools, ``sources`` the event's none-sources, updated in place.
 */
static PyObject *
ImageDecoder_image(ImageDecoder *self, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 6) {
        PyErr_SetString(PyExc_TypeError, "image() takes 6 arguments");
        return NULL;
    }
    PyObject *data_obj = args[0], *present = args[2], *sources = args[5];
    if (!PyBytes_Check(data_obj) || !PyTuple_Check(present) || !PyDict_Check(sources)) {
        PyErr_SetString(PyExc_TypeError, "image(bytes, int, tuple, int, bool, dict)");
        return NULL;
    }
    Py_ssize_t pos = PyLong_AsSsize_t(args[1]);
    Py_ssize_t null_bytes = PyLong_AsSsize_t(args[3]);
    if ((pos == -1 || null_bytes == -1) && PyErr_Occurred()) {
        return NULL;
    }
    int full = PyObject_IsTrue(args[4]);
    if (full < 0) {
        return NULL;
    }
    const uint8_t *data = (const uint8_t *)PyBytes_AS_STRING(data_obj);
    Py_ssize_t len = PyBytes_GET_SIZE(data_obj);
    if (pos < 0 || null_bytes < 0 || pos > len || len - pos < null_bytes) {
        PyErr_SetString(PyExc_ValueError, "short null bitmap");
        return NULL;
    }
    if (PyTuple_GET_SIZE(present) < self->count) {
        PyErr_SetString(PyExc_ValueError, "bitmap shorter than the columns");
        return NULL;
    }
    const uint8_t *nulls = data + pos;
    pos += null_bytes;
    PyObject *values = PyDict_New();
    if (values == NULL) {
        return NULL;
    }
    Py_ssize_t null_index = 0;
    for (Py_ssize_t i = 0; i < self->count; i++) {
        Column *col = &self->columns[i];
        if (!full && PyTuple_GET_ITEM(present, i) != Py_True) {
            if (set_source(sources, col->source_key, self->cols_bitmap_source) < 0
                || PyDict_SetItem(values, col->key, Py_None) < 0) {
                goto fail;
            }
            continue;
        }
        if ((null_index >> 3) >= null_bytes) {
            PyErr_SetString(PyExc_IndexError, "index out of range");
            goto fail;
        }
        if (nulls[null_index >> 3] & (1 << (null_index & 7))) {
            if (set_source(sources, col->source_key, self->null_source) < 0
                || PyDict_SetItem(values, col->key, Py_None) < 0) {
                goto fail;
            }
        } else {
            PyObject *value = read_value(self, col, data_obj, data, len, &pos, sources);
            if (value == NULL) {
                goto fail;
            }
            int failed = PyDict_SetItem(values, col->key, value);
            Py_DECREF(value);
            if (failed < 0) {
                goto fail;
            }
        }
        null_index++;
    }
    PyObject *none_sources = PyDict_New();
    if (none_sources == NULL) {
        goto fail;
    }
    Py_ssize_t at = 0;
    PyObject *key, *value;
    while (PyDict_Next(values, &at, &key, &value)) {
        if (value != Py_None) {
            continue;
        }
        PyObject *why = PyDict_GetItemWithError(sources, key);
        if (why == NULL) {
            if (PyErr_Occurred()) {
                Py_DECREF(none_sources);
                goto fail;
            }
            why = self->null_source;
        }
        if (PyDict_SetItem(none_sources, key, why) < 0) {
            Py_DECREF(none_sources);
            goto fail;
        }
    }
    return Py_BuildValue("(NNn)", values, none_sources, pos);
fail:
    Py_DECREF(values);
    return NULL;
}

static PyMethodDef ImageDecoder_methods[] = {
    {"image", (PyCFunction)(void (*)(void))ImageDecoder_image, METH_FASTCALL,
     "image(data, pos, present, null_bytes, full, sources) -> (values, none_sources, pos)"},
    {NULL, NULL, 0, NULL},
};

static PyTypeObject ImageDecoderType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "cdc_console.mysql._rowimages.ImageDecoder",
    .tp_doc = "A table's row images decoded as pymysqlreplication decodes them.",
    .tp_basicsize = sizeof(ImageDecoder),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)ImageDecoder_init,
    .tp_dealloc = (destructor)ImageDecoder_dealloc,
    .tp_methods = ImageDecoder_methods,
};

static struct PyModuleDef rowimages_module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "cdc_console.mysql._rowimages",
    .m_doc = "Compiled binlog row-image decoder (see cdc_console/mysql/row_images.py).",
    .m_size = -1,
};

PyMODINIT_FUNC
PyInit__rowimages(void)
{
    PyDateTime_IMPORT;
    if (PyDateTimeAPI == NULL) {
        return NULL;
    }
    if (PyType_Ready(&ImageDecoderType) < 0) {
        return NULL;
    }
    PyObject *m = PyModule_Create(&rowimages_module);
    if (m == NULL) {
        return NULL;
    }
    if (PyModule_AddObjectRef(m, "ImageDecoder", (PyObject *)&ImageDecoderType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
