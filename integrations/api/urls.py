from rest_framework.routers import SimpleRouter

from .views import WebhookViewSet

router = SimpleRouter()
router.register("webhooks", WebhookViewSet, basename="webhook")

urlpatterns = router.urls
