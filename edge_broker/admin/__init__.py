"""The admin HTTP listener (``[admin]``): the broker's one HTTP stack (``http.py``, h11), admin
users and their sessions, and the JSON API ``/api/v1`` that calls the broker only through
``broker/operator.py``. Imported only when ``[admin]`` or ``[metrics]`` is enabled."""
